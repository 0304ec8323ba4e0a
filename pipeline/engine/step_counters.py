"""A decode step's record of its tokens and its rows' counters as one kernel, one program a row.

After sampling, a step writes each row's tokens (and the hidden state that chose them) into the
row's column, pushes them into its repetition window, and moves its counters: EOS or the row's
``max_new`` ends it, a kept token counts. As PyTorch ops (``decode_step.record_tokens`` and
``advance_counters``) that is ~20 kernels over a few kB each, every step: launches and latency,
not bytes (~2 us each in a replayed graph on an H100, some 40 us of a step). Here one program a
row does the same integer operations on the same values, so the same tokens, windows, columns
and counters to the bit (``tests/test_step_counters.py``, under Triton's CPU interpreter).

Runs where the fused sampling runs (``fused_sampling.ON``: CUDA, ``TTS_JOBS_FUSED_SAMPLING=0``
runs the ops for both).
"""

from __future__ import annotations

import torch

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover

    @triton.jit
    def _record_and_advance_kernel(new_ptr, stride_new, tokens_ptr, stride_tb, stride_tt, last_column,
                                   window_ptr, stride_wb, stride_wq, hidden_ptr, stride_h,
                                   hiddens_ptr, stride_hb, stride_ht, width,
                                   row_step_ptr, done_ptr, max_new_ptr, produced_ptr, hit_ptr, eos,
                                   codebooks, WINDOW: tl.constexpr, CODEBOOKS: tl.constexpr,
                                   HIDDEN: tl.constexpr, KEEP_HIDDENS: tl.constexpr):
        row = tl.program_id(0)
        q = tl.arange(0, CODEBOOKS)
        inside = q < codebooks
        step = tl.load(row_step_ptr + row)
        alive = tl.load(done_ptr + row) == 0
        tokens = tl.load(new_ptr + row * stride_new + q, mask=inside, other=0)
        column = tl.minimum(step, last_column)  # the scratch column for rows past their end
        tl.store(tokens_ptr + row * stride_tb + column * stride_tt + q, tokens, mask=inside)
        tl.store(window_ptr + row * stride_wb + q * stride_wq + step % WINDOW, tokens, mask=inside)
        if KEEP_HIDDENS:
            c = tl.arange(0, HIDDEN)
            hidden = tl.load(hidden_ptr + row * stride_h + c, mask=c < width)
            tl.store(hiddens_ptr + row * stride_hb + column * stride_ht + c, hidden, mask=c < width)
        chose_eos = tl.sum(tl.where(inside & (tokens == eos), 1, 0), 0) > 0
        kept = alive & (chose_eos == 0)
        at_limit = tl.load(max_new_ptr + row) <= step + 1
        tl.store(produced_ptr + row, tl.load(produced_ptr + row) + kept.to(tl.int64))
        hit = tl.load(hit_ptr + row) != 0
        tl.store(hit_ptr + row, (hit | (kept & at_limit)).to(tl.int8))
        tl.store(done_ptr + row, ((alive == 0) | chose_eos | at_limit).to(tl.int8))
        tl.store(row_step_ptr + row, step + alive.to(tl.int64))


def record_and_advance(state, rows: int, tokens: torch.Tensor, eos: int) -> None:
    """``decode_step.record_tokens`` then ``advance_counters`` for the first ``rows`` slots of
    ``state`` and their new ``tokens`` [rows, Q], in one launch (a row done before stays done,
    its counters as they were; its tokens still land in its column, as the ops put them)."""
    tokens = tokens.contiguous()
    hiddens = state.hiddens
    keep = hiddens is not None
    hidden = state.hidden
    codebooks = tokens.shape[1]
    _record_and_advance_kernel[(rows,)](
        tokens, tokens.stride(0), state.tokens, state.tokens.stride(0), state.tokens.stride(1),
        state.shape.steps, state.window, state.window.stride(0), state.window.stride(1),
        hidden, hidden.stride(0), hiddens if keep else hidden, hiddens.stride(0) if keep else 0,
        hiddens.stride(1) if keep else 0, hidden.shape[1],
        state.row_step, state.done.view(torch.int8), state.max_new, state.produced,
        state.hit_limit.view(torch.int8), eos, codebooks,
        WINDOW=state.window.shape[2], CODEBOOKS=triton.next_power_of_2(codebooks),
        HIDDEN=triton.next_power_of_2(hidden.shape[1]), KEEP_HIDDENS=keep, num_warps=4)

"""One decode step over the first B slots: sample a token from each slot's hidden state, record it,
then run the GPT one position on it. Everything stays on the device and in place.

Per slot: temperature, repetition penalty over its own last 16 tokens, EOS masked until its
``min_new``, top-p/top-k and its own Gumbel noise; EOS or ``max_new`` ends it. Finished (and free)
slots still flow through the step — a fixed shape is what lets a CUDA graph replay it — but their
counters stop and their writes land where nothing is read: cache index ``write_at`` (not advanced),
token column ``row_step`` (past what they kept, or the scratch column).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import pipeline.engine.fused_sampling as fused_sampling  # noqa: PLR0402 (a package import is a circle)
import pipeline.engine.step_counters as step_counters  # noqa: PLR0402 (a package import is a circle)
from pipeline.engine.gpt import FusedLlama
from pipeline.engine.sampling import push_window, sample
from pipeline.engine.slots import SlotState


@dataclass(frozen=True)
class TokenSpace:
    """What a step emits: ``codebooks`` tokens from a ``vocab``; ``eos`` ends a row."""

    codebooks: int
    vocab: int
    eos: int
    embed: Callable[[torch.Tensor], torch.Tensor]  # [B, Q] tokens -> [B, C]
    logits: Callable[[torch.Tensor], torch.Tensor]  # [B, C] hidden -> float32 [B, Q, V]
    # the same in the model's dtype, which the fused sampling reads as it is (exactly the same
    # float32 values; no float32 copy of [B, Q, V] a step: 7.3 us of an H100's at 1,024 rows)
    head: Callable[[torch.Tensor], torch.Tensor] | None = None


@dataclass(frozen=True)
class StepKind:
    """What selects a step's code: its shape and which sampling stages it needs."""

    rows: int  # B: the first B slots
    attend: int  # cache positions attended to
    greedy: bool
    penalised: bool
    candidates: int = 0  # tokens ranked per (row, codebook) when sampling (0: all)


def decode_step(gpt: FusedLlama, space: TokenSpace, state: SlotState, kind: StepKind) -> None:
    b = kind.rows
    step = state.row_step[:b]
    alive = ~state.done[:b]
    tokens = sample_tokens(space, state, kind, step)
    if _fused(state):
        step_counters.record_and_advance(state, b, tokens, space.eos)  # both below, one launch
    else:
        record_tokens(state, b, step, tokens)
        advance_counters(state, b, step, alive, tokens, space.eos)
    run_gpt_step(gpt, space, state, kind, tokens, alive)


def _fused(state: SlotState) -> bool:
    """Whether a step's sampling and bookkeeping run as Triton kernels (a GPU, ``fused_sampling.ON``)."""
    return fused_sampling.ON and state.hidden.is_cuda and fused_sampling.available()


def sample_tokens(space: TokenSpace, state: SlotState, kind: StepKind, step: torch.Tensor) -> torch.Tensor:
    b = kind.rows
    sampling = state.sampling.first(b, kind.greedy, kind.penalised, kind.candidates)
    fused = _fused(state)
    draw, logits = ((fused_sampling.sample_fused, space.head or space.logits) if fused
                    else (sample, space.logits))
    return draw(logits(state.hidden[:b]), sampling, state.window[:b], state.min_new[:b] <= step,
                space.eos, step, state.cells)


def record_tokens(state: SlotState, b: int, step: torch.Tensor, tokens: torch.Tensor) -> None:
    """Token (and the hidden state that chose it) into the slot's column ``row_step``."""
    slots = torch.arange(b, device=step.device)
    column = step.clamp(max=state.shape.steps)  # the scratch column for rows past their end
    state.tokens[slots, column] = tokens
    if state.hiddens is not None:
        state.hiddens[slots, column] = state.hidden[:b]
    push_window(state.window[:b], step, tokens)


def advance_counters(state: SlotState, b: int, step: torch.Tensor, alive: torch.Tensor,
                      tokens: torch.Tensor, eos: int) -> None:
    """EOS ends a row (not counted as a token); reaching ``max_new`` ends it (counted)."""
    chose_eos = (tokens == eos).any(-1)
    kept = alive & ~chose_eos
    at_limit = state.max_new[:b] <= step + 1
    state.produced[:b] += kept.long()
    state.hit_limit[:b] |= kept & at_limit
    state.done[:b] |= alive & (chose_eos | at_limit)
    state.row_step[:b] += alive.long()


def run_gpt_step(gpt: FusedLlama, space: TokenSpace, state: SlotState, kind: StepKind,
                 tokens: torch.Tensor, alive: torch.Tensor) -> None:
    """The GPT one position on ``tokens`` [B, Q]: the next hidden states, the caches of the rows
    still ``alive`` advanced. Rows ended now or before (or slots holding none) attend to nothing:
    their next hidden state is never read."""
    b, attend = kind.rows, kind.attend
    write_at = state.write_at[:b]
    x = space.embed(tokens).unsqueeze(1).to(gpt.dtype)
    rope_at = state.rope_at[:b].clamp(max=state.rope_limit)
    hidden = gpt.forward_slots(x, rope_at, state.cache, write_at, attend, live=~state.done[:b])[:, 0]
    state.hidden[:b] = hidden
    state.write_at[:b] += alive.long()
    state.rope_at[:b] += alive.long()

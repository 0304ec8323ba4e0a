"""A decode step's sampling as one kernel, one program per (row, codebook).

``sampling.sample`` (what ``decode_step.sample_tokens`` runs) is some twenty small PyTorch
kernels (the temperature, the penalty's gather and scatter, the EOS mask, top-k, logsumexp, the
nucleus' cumsum, the noise hash, argmax): at 1,024 rows on an H100 they take 316 us of a ~3.3-ms
step (step-profile), each a launch over a few MB. Here one program loads its 626 logits once and
does it all in registers: the same operations in the same order on the same values, so it draws
the same tokens (the noise is the same hash of row seed, step, codebook and token) up to float
rounding in the logsumexp and the nucleus' running sum, which only a tie within an ulp could turn.
The k best are taken one at a time, and no more once the nucleus is full (a sort of the whole
vocabulary per program took 467 us); each kept token's noise is hashed as it is taken, not the
vocabulary's, and the window's tokens are counted one entry at a time: a program then holds 74
registers on two warps (no spills) where a [vocabulary, window] comparison held 255 and spilled,
so 2 warps a program take 31 us at 1,024 rows on an H100 where 8 took 81 (step-profile). Engine
bench, H100: +4 % (3.31 -> 3.13 ms a step) for the kernel, +1.7 % more (2.49 -> 2.42 ms) for this.

On by default (``ON``; ``EngineTuning.fused_sampling``, ``TTS_JOBS_FUSED_SAMPLING=0`` runs the ops).
"""

from __future__ import annotations

import torch

from pipeline.engine.sampling import REPETITION_WINDOW, RowSampling
from pipeline.engine.triton_import import tl, triton

ON = True  # the engine's choice (loading.apply_tuning)
WARPS = 2  # per program (step-profile, H100, 1,024 rows: 1 warp 31.4 us, 2 30.8, 4 36.2, 8 49.1)


def available() -> bool:
    return triton is not None


def sample_fused(logits: torch.Tensor, sampling: RowSampling, window: torch.Tensor, allow: torch.Tensor,
                 eos: int, row_step: torch.Tensor, cells: torch.Tensor, warps: int | None = None) -> torch.Tensor:
    """Tokens [B, Q] drawn from raw ``logits`` [B, Q, V] (float32, or the model's half precision,
    read as float32: the same values) as ``sampling.sample`` draws
    them: divided by each row's temperature, penalised over its ``window`` [B, Q, 16] where
    ``sampling.penalised``, EOS masked where ``allow`` [B] is False, then top-p / top-k and the
    row's Gumbel noise at its ``row_step`` over ``cells`` [1, Q, V] (argmax where greedy)."""
    rows, codebooks, vocab = logits.shape
    tokens = torch.empty(rows, codebooks, dtype=torch.int64, device=logits.device)
    _sample_kernel[(rows, codebooks)](
        logits.contiguous(), sampling.temperature, sampling.top_p, sampling.top_k, sampling.penalty,
        sampling.seed_key, row_step, allow, window, cells, tokens, vocab, codebooks,
        EOS=eos, PADDED=triton.next_power_of_2(vocab), WINDOW=REPETITION_WINDOW,
        GREEDY=sampling.greedy, PENALISED=sampling.penalised, CANDIDATES=sampling.candidates,
        num_warps=warps or WARPS)
    return tokens


if triton is not None:  # pragma: no cover

    @triton.jit
    def _mix32(x):
        """sampling._mix32 on uint32 (its products mod 2**32 are what the int64 masks keep)."""
        x = x ^ (x >> 16)
        x = x * 0x7FEB352D
        x = x ^ (x >> 15)
        x = x * 0x2C1B3C6D
        return x ^ (x >> 16)

    @triton.jit
    def _processed_logits(logits_ptr, temperature_ptr, penalty_ptr, window_ptr, allow_ptr, row, code,
                          vocab, codebooks, EOS: tl.constexpr, PADDED: tl.constexpr,
                          WINDOW: tl.constexpr, PENALISED: tl.constexpr):
        """The (row, codebook)'s logits over the padded vocabulary as sample_tokens makes them
        before choosing: / temperature, the repetition penalty, EOS masked (-inf past the end)."""
        token = tl.arange(0, PADDED)
        inside = token < vocab
        x = tl.load(logits_ptr + (row * codebooks + code) * vocab + token, mask=inside,
                    other=float("-inf")).to(tl.float32)
        x = x / tl.load(temperature_ptr + row)
        if PENALISED:
            # one window entry at a time: a [vocabulary, window] comparison would hold 16 values a
            # token in registers, and spill, at the one or two warps a program now runs on
            count = tl.zeros([PADDED], tl.int32)
            for entry in tl.static_range(WINDOW):
                seen = tl.load(window_ptr + (row * codebooks + code) * WINDOW + entry)
                count += (token == seen).to(tl.int32)
            penalty = tl.load(penalty_ptr + row)
            alpha = tl.full([PADDED], 1.0, tl.float32)
            for times in tl.static_range(WINDOW):
                alpha = tl.where(count > times, alpha * penalty, alpha)
            x = tl.where(inside & (count > 0), tl.where(x < 0, x * alpha, x / alpha), x)
        allowed = tl.load(allow_ptr + row).to(tl.int32)
        return tl.where((token == EOS) & (allowed == 0), float("-inf"), x)

    @triton.jit
    def _sample_kernel(logits_ptr, temperature_ptr, top_p_ptr, top_k_ptr, penalty_ptr, seed_key_ptr,
                       row_step_ptr, allow_ptr, window_ptr, cells_ptr, tokens_ptr, vocab, codebooks,
                       EOS: tl.constexpr, PADDED: tl.constexpr, WINDOW: tl.constexpr,
                       GREEDY: tl.constexpr, PENALISED: tl.constexpr, CANDIDATES: tl.constexpr):
        row = tl.program_id(0)
        code = tl.program_id(1)
        x = _processed_logits(logits_ptr, temperature_ptr, penalty_ptr, window_ptr, allow_ptr, row, code,
                              vocab, codebooks, EOS, PADDED, WINDOW, PENALISED)
        if GREEDY:
            chosen = tl.argmax(x, 0).to(tl.int64)
        elif CANDIDATES > 0:
            chosen = _draw_among_best(x, top_p_ptr, top_k_ptr, seed_key_ptr, row_step_ptr, cells_ptr, row,
                                      code, vocab, PADDED, CANDIDATES)
        else:
            chosen = _draw(x, top_p_ptr, top_k_ptr, seed_key_ptr, row_step_ptr, cells_ptr, row, code,
                           vocab, PADDED)
        tl.store(tokens_ptr + row * codebooks + code, chosen)

    @triton.jit
    def _step_key(seed_key_ptr, row_step_ptr, row):
        """The row's half of sampling.gumbel_noise's hash at its step."""
        seed_key = tl.load(seed_key_ptr + row).to(tl.uint32)
        step = tl.load(row_step_ptr + row).to(tl.uint32)
        return _mix32(seed_key + step * 0x9E3779B1)

    @triton.jit
    def _gumbel(step_key, cell):
        """sampling.gumbel_noise from the row's step key and a (codebook, token)'s cell."""
        noise_bits = _mix32(_mix32(step_key ^ cell.to(tl.uint32)))
        uniform = ((noise_bits >> 8).to(tl.float32) + 0.5) * (1.0 / 16777216.0)
        return -tl.log(-tl.log(uniform))

    @triton.jit
    def _noise(seed_key_ptr, row_step_ptr, cells_ptr, row, code, token, vocab):
        """sampling.gumbel_noise of the row at its step for ``token`` of codebook ``code``."""
        cell = tl.load(cells_ptr + code * vocab + token, mask=token < vocab, other=0)
        return _gumbel(_step_key(seed_key_ptr, row_step_ptr, row), cell)

    @triton.jit
    def _draw_among_best(x, top_p_ptr, top_k_ptr, seed_key_ptr, row_step_ptr, cells_ptr, row, code, vocab,
                         PADDED: tl.constexpr, CANDIDATES: tl.constexpr):
        """sampling.choose where the pool ranks its best candidates (top-k <= the largest bucket):
        the row's k best tokens (k <= ``CANDIDATES``, the pool's bucket) taken one at a time, best
        first (ties: the lower token), each kept while the probability of those before it is under
        top-p (or among the first min(k, 3)), and Gumbel-max among the kept as they come: each
        kept token's noise is hashed for it alone, and a later one wins only with a higher score
        (ties: the better-ranked, as ``argmax`` over the ranked candidates takes)."""
        token = tl.arange(0, PADDED)
        most = tl.max(x, 0)
        logsumexp = most + tl.log(tl.sum(tl.exp(x - most), 0))
        top_p = tl.load(top_p_ptr + row)
        top_k = tl.load(top_k_ptr + row).to(tl.int32)
        nucleus = tl.where(top_p >= 1.0, 2.0, top_p)  # top-p 1 keeps all (any mass is below 2)
        step_key = _step_key(seed_key_ptr, row_step_ptr, row)
        left = x
        mass_before = tl.sum(tl.zeros([PADDED], tl.float32), 0)
        chosen = tl.sum(tl.zeros([PADDED], tl.int32), 0)
        chosen_score = tl.max(tl.full([PADDED], float("-inf"), tl.float32), 0)
        for rank in range(0, CANDIDATES):
            # once a rank is not kept none after it is (the mass before only grows): skipped
            if (rank < top_k) & ((mass_before < nucleus) | (rank < tl.minimum(top_k, 3))):
                best, at = tl.max(left, 0, return_indices=True, return_indices_tie_break_left=True)
                left = tl.where(token == at, float("-inf"), left)
                mass_before += tl.exp(best - logsumexp)
                # (a padding token's logit is -inf: its score never wins, and its cell is not read)
                cell = tl.load(cells_ptr + code * vocab + at, mask=at < vocab, other=0)
                score = best + _gumbel(step_key, cell)
                better = score > chosen_score
                chosen = tl.where(better, at, chosen)
                chosen_score = tl.where(better, score, chosen_score)
        return chosen.to(tl.int64)

    @triton.jit
    def _draw(x, top_p_ptr, top_k_ptr, seed_key_ptr, row_step_ptr, cells_ptr, row, code, vocab,
              PADDED: tl.constexpr):
        """sampling.choose where the pool ranks the whole vocabulary (a top-k past the buckets):
        tokens by descending logit (ties: the lower token first), the nucleus by the probability of
        the better-ranked ones, then Gumbel-max among the kept."""
        token = tl.arange(0, PADDED).to(tl.int64)
        most = tl.max(x, 0)
        logsumexp = most + tl.log(tl.sum(tl.exp(x - most), 0))
        # a float's bits made an order-keeping integer, the token in the low bits (lower first)
        bits = x.to(tl.int32, bitcast=True).to(tl.int64)
        order_key = tl.where(bits >= 0, bits + 2147483648, -1 - bits)
        ranked = tl.sort(order_key * PADDED + (PADDED - 1 - token), descending=True)
        ranked_token = PADDED - 1 - ranked % PADDED
        key = ranked // PADDED
        best = tl.where(key >= 2147483648, key - 2147483648, -1 - key).to(tl.int32).to(tl.float32, bitcast=True)
        probs = tl.exp(best - logsumexp)
        mass_before = tl.cumsum(probs, 0) - probs
        rank = tl.arange(0, PADDED)
        top_p = tl.load(top_p_ptr + row)
        top_k = tl.load(top_k_ptr + row)
        nucleus = tl.where(top_p >= 1.0, 2.0, top_p)  # top-p 1 keeps all (any mass is below 2)
        keep = (mass_before < nucleus) | (rank < tl.minimum(top_k, 3))
        keep = keep & (rank < top_k) & (ranked_token < vocab)
        noise = _noise(seed_key_ptr, row_step_ptr, cells_ptr, row, code, ranked_token, vocab)
        scores = tl.where(keep, best + noise, float("-inf"))
        at = tl.argmax(scores, 0)
        return tl.sum(tl.where(rank == at, ranked_token, 0), 0)

"""Per-row sampling on the device, with no host sync and no dependence on batch-mates.

Each row carries its own temperature, top-p, top-k, repetition penalty, EOS floor and seed. The
random draw is the Gumbel-max trick with noise from a counter-based hash of
(row seed, the row's own step, codebook, token): a row's tokens therefore depend only on its own logits and seed,
never on which rows share its batch or where it sits, and no generator state is carried.

Order of operations follows upstream (``gpt.generate``): logits / temperature, repetition penalty
over the last 16 tokens, top-p, top-k. Two deliberate differences:

- EOS is masked (before ``min_new_tokens``) *before* top-p/top-k, so the kept set never empties.
- ``top_k`` means exactly k (1 = greedy). Upstream silently raises k below 3 to 3
  (``min_tokens_to_keep=3``); top-p still keeps at least ``min(3, top_k)`` tokens like upstream.

Only the k best tokens can be drawn, so a step ranks just the best ``candidates`` of each
(row, codebook) (``torch.topk``, with ``candidates`` a bucket at or above the pool's largest
top-k) instead of sorting the whole vocabulary, and hashes noise for those alone. The nucleus
needs each candidate's probability, i.e. the full softmax's normaliser: one logsumexp. Pools with
a top-k above the largest bucket sort everything. (On the H200 at 1024 rows the full sort and
noise over 4 x 626 tokens take 560 µs of a 5 ms step.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.engine.host_lists import to_device

REPETITION_WINDOW = 16  # upstream's past_window
CANDIDATE_BUCKETS = (16, 32, 64)  # tokens ranked per (row, codebook); a larger top-k sorts all
_MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B1


@dataclass(frozen=True)
class RowSampling:
    """Sampling settings of each row, on the device. Shapes [B, 1, 1] so they broadcast over
    [B, Q, V] logits (Q codebooks, V vocabulary)."""

    temperature: torch.Tensor  # float32
    top_p: torch.Tensor  # float32
    top_k: torch.Tensor  # int64, >= 1
    penalty: torch.Tensor  # float32
    seed_key: torch.Tensor  # int64 in [0, 2**32): hash of the row's seed
    greedy: bool  # every row has top_k == 1: no noise needed
    penalised: bool  # some row has a repetition penalty other than 1
    candidates: int  # tokens ranked per (row, codebook), >= every row's top_k; 0 = all

    @staticmethod
    def build(temperature: list[float], top_p: list[float], top_k: list[int], penalty: list[float],
              seeds: list[int], device: torch.device) -> RowSampling:
        def col(values: list, dtype: torch.dtype) -> torch.Tensor:
            return to_device(values, device, dtype).view(-1, 1, 1)

        keys = to_device([s & _MASK32 for s in seeds], device)
        return RowSampling(
            temperature=col(temperature, torch.float32),
            top_p=col(top_p, torch.float32),
            top_k=col(top_k, torch.int64),
            penalty=col(penalty, torch.float32),
            seed_key=_mix32(_mix32(keys) ^ 0x5BD1E995).view(-1, 1, 1),
            greedy=all(k == 1 for k in top_k),
            penalised=any(p != 1.0 for p in penalty),
            candidates=candidate_count(top_k),
        )

    def select(self, index: torch.Tensor) -> RowSampling:
        """The settings of the rows in ``index``."""
        return RowSampling(self.temperature[index], self.top_p[index], self.top_k[index],
                           self.penalty[index], self.seed_key[index], self.greedy, self.penalised,
                           self.candidates)

    def first(self, rows: int, greedy: bool, penalised: bool, candidates: int) -> RowSampling:
        """A view of the first ``rows`` rows (the live slots), with the pool's stage settings."""
        return RowSampling(self.temperature[:rows], self.top_p[:rows], self.top_k[:rows],
                           self.penalty[:rows], self.seed_key[:rows], greedy, penalised, candidates)


def candidate_count(top_k: list[int]) -> int:
    """The smallest bucket holding every row's top-k, or 0 (rank the whole vocabulary)."""
    largest = max(top_k, default=1)
    return next((bucket for bucket in CANDIDATE_BUCKETS if bucket >= largest), 0)


def push_window(window: torch.Tensor, row_step: torch.Tensor, tokens: torch.Tensor) -> None:
    """Write each row's new tokens [B, Q] at its own ring position (its step mod 16)."""
    rows, codebooks, size = window.shape
    at = (row_step % size).view(rows, 1, 1).expand(rows, codebooks, 1)
    window.scatter_(2, at, tokens.unsqueeze(-1))


def apply_penalty(logits: torch.Tensor, window: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """Upstream's CustomRepetitionPenaltyLogitsProcessorRepeat, per row, in place: a token seen
    n times in the row's window [B, Q, 16] (``vocab`` where empty) has its (temperature-scaled)
    logit pushed away from 0 by penalty**n.

    Only the window's tokens change, so only they are touched: each entry's count within its
    window, its logit gathered, penalised and scattered back (duplicates write equal values).
    Empty entries point at token 0 with token 0's own count, which leaves it as it must be.
    The values are exactly those of penalising every token by penalty**count (count 0: x1)."""
    vocab = logits.shape[-1]
    tokens = torch.where(window < vocab, window, 0)
    seen = (tokens.unsqueeze(-1) == window.unsqueeze(-2)).sum(-1)  # empty entries never match
    alpha = torch.pow(penalty, seen.to(logits.dtype))
    picked = logits.gather(-1, tokens)
    return logits.scatter_(-1, tokens, torch.where(picked < 0, picked * alpha, picked / alpha))


def mask_eos(logits: torch.Tensor, eos: int, allow: torch.Tensor) -> torch.Tensor:
    """-inf (in place) on the EOS column of rows whose ``allow`` [B] is False."""
    column = logits[:, :, eos]
    logits[:, :, eos] = torch.where(allow.view(-1, 1), column, float("-inf"))
    return logits


def filter_top_p_top_k(probs: torch.Tensor, top_p: torch.Tensor,
                       top_k: torch.Tensor) -> torch.Tensor:
    """Keep-mask of tokens inside both the top-p nucleus and the top k, given the probabilities
    of the best tokens in descending order (all of them, or the best ``candidates``)."""
    rank = torch.arange(probs.shape[-1], device=probs.device)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # probability of the better-ranked tokens
    in_nucleus = (mass_before < top_p) | (rank < torch.clamp(top_k, max=3)) | (top_p >= 1.0)
    return in_nucleus & (rank < top_k)


def sample(logits: torch.Tensor, sampling: RowSampling, window: torch.Tensor, allow: torch.Tensor,
           eos: int, row_step: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Tokens [B, Q] from raw ``logits`` [B, Q, V]: / temperature, the repetition penalty over
    each row's ``window`` (where the pool has one), EOS masked where ``allow`` [B] is False, then
    ``choose``. ``fused_sampling.sample_fused`` is the same in one kernel."""
    logits = logits / sampling.temperature
    if sampling.penalised:
        logits = apply_penalty(logits, window, sampling.penalty)
    return choose(mask_eos(logits, eos, allow), sampling, row_step, cells)


def choose(logits: torch.Tensor, sampling: RowSampling, row_step: torch.Tensor,
           cells: torch.Tensor) -> torch.Tensor:
    """Sample one token per (row, codebook) from processed ``logits`` [B, Q, V]; returns [B, Q].

    The draw is Gumbel-max with each row's noise at its ``row_step`` over ``cells`` [1, Q, V]
    (``noise_cells``); greedy pools take the argmax.
    """
    if sampling.greedy:
        return logits.argmax(dim=-1)
    if 0 < sampling.candidates < logits.shape[-1]:
        best, order = torch.topk(logits, sampling.candidates, dim=-1)  # sorted, descending
        probs = torch.exp(best - torch.logsumexp(logits, dim=-1, keepdim=True))
    else:
        best, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(best, dim=-1)
    keep = filter_top_p_top_k(probs, sampling.top_p, sampling.top_k)
    noise = gumbel_noise(sampling.seed_key, row_step,
                         cells.expand(order.shape[0], -1, -1).gather(-1, order))
    scores = torch.where(keep, best + noise, float("-inf"))
    return order.gather(-1, scores.argmax(dim=-1, keepdim=True)).squeeze(-1)


def noise_cells(codebooks: int, vocab: int, device: torch.device) -> torch.Tensor:
    """The per-(codebook, token) half of the noise hash, [1, Q, V]; made once per model."""
    cell = torch.arange(codebooks * vocab, dtype=torch.int64, device=device)
    return _mix32((cell * _GOLDEN + 0x68E31DA4) & _MASK32).view(1, codebooks, vocab)


def gumbel_noise(seed_key: torch.Tensor, row_step: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Gumbel noise for each row at its own step over ``cells`` ([1, Q, V], or [B, Q, k] picked
    out of them): a pure function of (row seed, step, codebook, token), so neither batch-mates,
    slot, refill order nor which tokens are ranked change a row's draw."""
    rows = row_step.shape[0]
    step_key = _mix32((seed_key.view(rows, 1, 1) + row_step.view(rows, 1, 1) * _GOLDEN) & _MASK32)
    bits = _mix32(_mix32(step_key ^ cells))
    uniform = ((bits >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))  # in (0, 1)
    return -torch.log(-torch.log(uniform))


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (xorshift-multiply) on int64 tensors holding values < 2**32.

    Multipliers stay below 2**31 so every product fits in int64 without overflow.
    """
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x2C1B3C6D) & _MASK32
    return x ^ (x >> 16)

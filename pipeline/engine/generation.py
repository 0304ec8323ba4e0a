"""The batched generation loop: prefill, then one GPT step per audio token, every row on its own terms.

Per row: its own prompt (voice), seed, temperature/top-p/top-k/repetition penalty, EOS floor
(``min_new``) and forced stop (``max_new``). The device is asked whether rows have finished only
every ``check_every`` steps; when enough have, they are dropped from the KV cache and from every
per-row tensor, so finished rows stop costing compute.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pipeline.engine.gpt import FusedLlama, KVCache, additive_mask
from pipeline.engine.prompts import PromptBatch
from pipeline.engine.sampling import (
    NoiseSource,
    RepetitionWindow,
    RowSampling,
    apply_penalty,
    choose,
    mask_eos,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenSpace:
    """What a step emits: ``codebooks`` tokens from a ``vocab``; ``eos`` ends a row."""

    codebooks: int
    vocab: int
    eos: int
    embed: Callable[[torch.Tensor], torch.Tensor]  # [B, Q] tokens -> [B, C]
    logits: Callable[[torch.Tensor], torch.Tensor]  # [B, C] hidden -> float32 [B, Q, V]


@dataclass(frozen=True)
class RowLimits:
    min_new: list[int]  # EOS is masked before this many tokens
    max_new: list[int]  # forced stop after this many tokens


@dataclass(frozen=True)
class Generated:
    """Per row: tokens [T, Q] (EOS excluded, on the CPU), the hidden state that produced each token
    [T, C] (on the device; None when not kept), and whether it stopped at ``max_new``."""

    tokens: list[torch.Tensor]
    hiddens: list[torch.Tensor] | None
    hit_limit: list[bool]


@dataclass
class _Rows:
    """The device-side state of the rows still generating (shrinks on compaction)."""

    ids: torch.Tensor  # int64 [b]: each active row's index in the original batch
    next_position: torch.Tensor  # int64 [b]: RoPE position of the next input token
    min_new: torch.Tensor  # int64 [b]
    max_new: torch.Tensor  # int64 [b]
    done: torch.Tensor  # bool [b]
    produced: torch.Tensor  # int64 [b]: tokens kept so far
    hit_limit: torch.Tensor  # bool [b]
    mask: torch.Tensor  # additive [b, 1, 1, S]: padding of each row's prompt is -inf
    max_new_host: list[int]

    def select(self, index: torch.Tensor, kept: list[int]) -> _Rows:
        return _Rows(ids=self.ids[index], next_position=self.next_position[index],
                     min_new=self.min_new[index], max_new=self.max_new[index],
                     done=self.done[index], produced=self.produced[index],
                     hit_limit=self.hit_limit[index], mask=self.mask[index],
                     max_new_host=[self.max_new_host[i] for i in kept])


def generate(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch, limits: RowLimits,
             sampling: RowSampling, keep_hiddens: bool = True, check_every: int = 8,
             compact_fraction: float = 0.25) -> Generated:
    """Generate up to ``max_new`` tokens for every row of ``prompts``."""
    device = prompts.embeds.device
    batch, width = prompts.rows, prompts.width
    steps_cap = max(limits.max_new)
    cache = gpt.new_cache(batch, width + steps_cap)
    tokens_out = torch.zeros(steps_cap, batch, space.codebooks, dtype=torch.int64, device=device)
    hiddens_out = (torch.zeros(steps_cap, batch, gpt.hidden, dtype=gpt.dtype, device=device)
                   if keep_hiddens else None)
    rows = _initial_rows(prompts, limits, steps_cap, gpt.dtype)
    window = RepetitionWindow(batch, space.codebooks, space.vocab, device)
    noise = None if sampling.greedy else NoiseSource(sampling.seed_key, space.codebooks, space.vocab)
    finished: dict[int, tuple[int, bool]] = {}

    hidden = _prefill(gpt, prompts, cache)
    step = 0
    while True:
        if hiddens_out is not None:
            hiddens_out[step].index_copy_(0, rows.ids, hidden)
        logits = space.logits(hidden) / sampling.temperature
        if sampling.penalised:
            logits = apply_penalty(logits, window.counts(), sampling.penalty)
        logits = mask_eos(logits, space.eos, rows.min_new <= step)
        tokens = choose(logits, sampling, noise.at(step) if noise is not None else None)
        window.push(step, tokens)
        tokens_out[step].index_copy_(0, rows.ids, tokens)
        _update_rows(rows, tokens, space.eos, step)
        step += 1
        if step >= max(rows.max_new_host) or step % check_every == 0:
            done = rows.done.tolist()  # the only host sync, once every check_every steps
            if all(done) or step >= max(rows.max_new_host):
                _record(finished, rows, range(len(done)))
                break
            if sum(done) >= max(1, int(len(done) * compact_fraction)):
                index = _compact(rows, done, window, noise, cache, finished)
                rows = rows.select(index, [i for i, d in enumerate(done) if not d])
                sampling, tokens = sampling.select(index), tokens[index]
        hidden = _step(gpt, space, tokens, rows, cache)
    return _collect(tokens_out, hiddens_out, finished, batch)


def _initial_rows(prompts: PromptBatch, limits: RowLimits, steps_cap: int,
                  dtype: torch.dtype) -> _Rows:
    device = prompts.embeds.device
    batch = prompts.rows
    valid = torch.cat([prompts.valid, torch.ones(batch, steps_cap, dtype=torch.bool,
                                                 device=device)], 1)

    def col(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int64, device=device)

    return _Rows(ids=torch.arange(batch, device=device), next_position=prompts.lengths.clone(),
                 min_new=col(limits.min_new), max_new=col(limits.max_new),
                 done=torch.zeros(batch, dtype=torch.bool, device=device),
                 produced=torch.zeros(batch, dtype=torch.int64, device=device),
                 hit_limit=torch.zeros(batch, dtype=torch.bool, device=device),
                 mask=additive_mask(valid, dtype)[:, None, None, :],
                 max_new_host=list(limits.max_new))


def _prefill(gpt: FusedLlama, prompts: PromptBatch, cache: KVCache) -> torch.Tensor:
    """Run every prompt position at once; return the last position's hidden state [B, C]."""
    hidden = run_positions(gpt, prompts, cache)
    return hidden[:, -1]


def run_positions(gpt: FusedLlama, prompts: PromptBatch, cache: KVCache) -> torch.Tensor:
    """Causal pass over all of ``prompts``' positions; returns hidden states [B, P, C]."""
    width = prompts.width
    device = prompts.embeds.device
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    # A padding query may attend to itself so that no softmax row is empty (NaN would reach the
    # cache); real queries never see padding.
    diagonal = torch.eye(width, dtype=torch.bool, device=device)
    allowed = causal & (prompts.valid[:, None, :] | diagonal)
    mask = additive_mask(allowed, gpt.dtype)[:, None]
    return gpt(prompts.embeds.to(gpt.dtype), gpt.rope(prompts.positions), mask, cache)


def _step(gpt: FusedLlama, space: TokenSpace, tokens: torch.Tensor, rows: _Rows,
          cache: KVCache) -> torch.Tensor:
    x = space.embed(tokens).unsqueeze(1).to(gpt.dtype)
    rope = gpt.rope(rows.next_position.unsqueeze(1))
    mask = rows.mask[..., : cache.length + 1]
    hidden = gpt(x, rope, mask, cache)[:, 0]
    rows.next_position += 1
    return hidden


def _update_rows(rows: _Rows, tokens: torch.Tensor, eos: int, step: int) -> None:
    """Bookkeeping after the token of ``step``: EOS ends a row (not counted); max_new stops it."""
    alive = ~rows.done
    chose_eos = (tokens == eos).any(-1)
    kept = alive & ~chose_eos
    at_limit = rows.max_new <= step + 1
    rows.produced += kept.long()
    rows.hit_limit |= kept & at_limit
    rows.done |= alive & (chose_eos | at_limit)


def _record(finished: dict[int, tuple[int, bool]], rows: _Rows, which: Sequence[int]) -> None:
    ids, produced, hit = rows.ids.tolist(), rows.produced.tolist(), rows.hit_limit.tolist()
    for i in which:
        finished[ids[i]] = (produced[i], hit[i])


def _compact(rows: _Rows, done: list[bool], window: RepetitionWindow, noise: NoiseSource | None,
             cache: KVCache, finished: dict[int, tuple[int, bool]]) -> torch.Tensor:
    """Record finished rows and drop them from the KV cache and the sampling state; returns the
    index of the surviving rows, for the caller to select its own per-row tensors."""
    _record(finished, rows, [i for i, d in enumerate(done) if d])
    kept = [i for i, d in enumerate(done) if not d]
    index = torch.tensor(kept, dtype=torch.int64, device=rows.ids.device)
    log.debug("compacting batch: %d of %d rows still generating", len(kept), len(done))
    cache.keep_rows(index)
    window.select(index)
    if noise is not None:
        noise.select(index)
    return index


def _collect(tokens_out: torch.Tensor, hiddens_out: torch.Tensor | None,
             finished: dict[int, tuple[int, bool]], batch: int) -> Generated:
    tokens_cpu = tokens_out.cpu()
    tokens, hiddens, hit = [], [] if hiddens_out is not None else None, []
    for row in range(batch):
        produced, hit_limit = finished[row]
        tokens.append(tokens_cpu[:produced, row].clone())
        if hiddens is not None:
            hiddens.append(hiddens_out[:produced, row])
        hit.append(hit_limit)
    return Generated(tokens=tokens, hiddens=hiddens, hit_limit=hit)


def score_tokens(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch,
                 steps: int) -> torch.Tensor:
    """Teacher forcing: logits [B, steps, Q, V] for tokens t_0..t_{steps-1}, where ``prompts`` holds
    each prompt followed by the forced tokens t_0..t_{steps-2} (the hidden state at the prompt's
    last position predicts t_0)."""
    cache = gpt.new_cache(prompts.rows, prompts.width)
    hidden = run_positions(gpt, prompts, cache)
    tail = hidden[:, prompts.width - steps:]
    rows, length = tail.shape[:2]
    return space.logits(tail.reshape(rows * length, -1)).view(rows, length, space.codebooks, -1)

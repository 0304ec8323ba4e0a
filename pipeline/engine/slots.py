"""The decode slots: every per-row tensor the generation loop needs, allocated once, fixed-shape.

A slot holds one sentence while it generates: its KV cache rows, the hidden state its next token is
sampled from, its sampling settings, its counters and the tokens (and hidden states) it has made.
The first ``B`` slots are what one decode step runs on, so a step's shapes depend only on ``B``
and the attention length, and a CUDA graph captured for them stays valid while the tensors live.

Slots are refilled in place when their sentence finishes (``admit``) and moved to the front when
few are left (``compact``); both write into the same storage, never reallocate it.

Shapes: N slots (capacity), P cache positions, T token columns (the longest ``max_new`` + 1: the
last column is scratch that finished rows may write to), Q codebooks, C hidden width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.engine.gpt import FusedLlama
from pipeline.engine.host_lists import to_device
from pipeline.engine.kv_cache import KVCache, SlotCache
from pipeline.engine.sampling import REPETITION_WINDOW, RowSampling, noise_cells


@dataclass(frozen=True)
class SlotShape:
    capacity: int  # N
    positions: int  # P
    steps: int  # T - 1: the most tokens any row may make
    codebooks: int
    vocab: int
    keep_hiddens: bool

    def holds(self, other: SlotShape) -> bool:
        """Whether slots of this shape can run work that needs ``other``."""
        return (self.capacity >= other.capacity and self.positions >= other.positions
                and self.steps >= other.steps and self.codebooks == other.codebooks
                and self.vocab == other.vocab and self.keep_hiddens >= other.keep_hiddens)


class SlotState:
    """Device tensors of N slots. Free slots are marked done and attend only to position 0."""

    def __init__(self, gpt: FusedLlama, shape: SlotShape) -> None:
        n, p, t, q = shape.capacity, shape.positions, shape.steps + 1, shape.codebooks
        device = gpt.norm.device
        self.shape = shape
        self.cache: SlotCache = gpt.new_slot_cache(n, p)  # zeros: free slots read finite values
        self.hidden = torch.zeros(n, gpt.hidden, dtype=gpt.dtype, device=device)
        self.write_at = torch.zeros(n, dtype=torch.int64, device=device)  # cache index of next K/V
        self.rope_at = torch.zeros(n, dtype=torch.int64, device=device)  # RoPE position of it
        self.row_step = torch.zeros(n, dtype=torch.int64, device=device)  # tokens chosen so far
        self.min_new = torch.zeros(n, dtype=torch.int64, device=device)
        self.max_new = torch.ones(n, dtype=torch.int64, device=device)
        self.done = torch.ones(n, dtype=torch.bool, device=device)
        self.produced = torch.zeros(n, dtype=torch.int64, device=device)  # tokens kept (no EOS)
        self.hit_limit = torch.zeros(n, dtype=torch.bool, device=device)
        self.window = torch.full((n, q, REPETITION_WINDOW), shape.vocab, dtype=torch.int64,
                                 device=device)
        self.sampling = RowSampling.build([1.0] * n, [1.0] * n, [1] * n, [1.0] * n, [0] * n, device)
        self.tokens = torch.zeros(n, t, q, dtype=torch.int64, device=device)
        self.hiddens = (torch.zeros(n, t, gpt.hidden, dtype=gpt.dtype, device=device)
                        if shape.keep_hiddens else None)
        self.cells = noise_cells(q, shape.vocab, device)
        self.rope_limit = int(gpt.rope_cos.shape[0]) - 1

    def per_slot_tensors(self) -> list[torch.Tensor]:
        """Every tensor whose first dimension is the slot (the KV cache included)."""
        s = self.sampling
        tensors = [self.hidden, self.write_at, self.rope_at, self.row_step,
                   self.min_new, self.max_new, self.done, self.produced, self.hit_limit,
                   self.window, self.tokens, s.temperature, s.top_p, s.top_k, s.penalty,
                   s.seed_key, *self.cache.tensors()]
        return tensors + ([self.hiddens] if self.hiddens is not None else [])

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.per_slot_tensors())


@dataclass(frozen=True)
class Newcomers:
    """Sentences entering free slots: their prefill output and their settings (device tensors)."""

    slots: list[int]
    # [n, H, width, D], filled by the prefill, prompts left-padded to width; None: the prefill
    # put each layer's keys and values into the slots as it made them (LoopRunner.prefill)
    cache: KVCache | None
    last_hidden: torch.Tensor  # [n, C]
    lengths: torch.Tensor  # int64 [n]: real prompt tokens (the next cache index and RoPE position)
    min_new: torch.Tensor  # int64 [n]
    max_new: torch.Tensor  # int64 [n]
    sampling: RowSampling  # [n, 1, 1] settings


def admit(state: SlotState, new: Newcomers) -> None:
    """Put prefilled sentences into their slots: KV rows, counters, settings, a fresh window.

    The prefill's left padding is dropped: each prompt moves to cache position 0 of its slot, so a
    slot's valid positions are always the prefix [0, write_at]."""
    index = to_device(new.slots, state.hidden.device)
    if new.cache is not None:
        for layer, (keys, values) in enumerate(zip(new.cache.keys, new.cache.values)):
            state.cache.admit(layer, index, keys, values, new.lengths)
    state.hidden[index] = new.last_hidden.to(state.hidden.dtype)
    state.write_at[index] = new.lengths
    state.rope_at[index] = new.lengths
    state.min_new[index] = new.min_new
    state.max_new[index] = new.max_new
    # index_fill_, not ``t[index] = scalar``: the latter copies the scalar to the GPU and waits
    # for every queued kernel first (a host sync per admission; docs/engine.md)
    for tensor, value in ((state.row_step, 0), (state.done, False), (state.produced, 0),
                          (state.hit_limit, False), (state.window, state.shape.vocab)):
        tensor.index_fill_(0, index, value)
    s, n = state.sampling, new.sampling
    for mine, theirs in ((s.temperature, n.temperature), (s.top_p, n.top_p), (s.top_k, n.top_k),
                         (s.penalty, n.penalty), (s.seed_key, n.seed_key)):
        mine[index] = theirs


def compact(state: SlotState, keep: list[int]) -> None:
    """Move the slots in ``keep`` (ascending) to the front, in that order, in place."""
    index = to_device(keep, state.hidden.device)
    n = len(keep)
    for tensor in state.per_slot_tensors():
        tensor[:n] = tensor.index_select(0, index)


def take_finished(state: SlotState, slots: list[int], produced: list[int]
                  ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Empty the finished ``slots``: the tokens (and hidden states) each made, ``produced[i]``
    of them, copied out; the slots marked done, free for the next sentences.

    One gather per tensor for all of them, and a view of it per row: a copy kernel per row and
    tensor takes a quarter of the decode loop's thread on the H200 (py-spy), each op waiting for
    the GIL that the worker's writer threads also want."""
    index = to_device(slots, state.tokens.device)
    longest = max(produced)
    tokens = state.tokens[:, :longest].index_select(0, index)
    hiddens = state.hiddens[:, :longest].index_select(0, index) if state.hiddens is not None else None
    state.done.index_fill_(0, index, True)  # no host sync, unlike ``done[index] = True``
    return ([tokens[i, :n] for i, n in enumerate(produced)],
            [hiddens[i, :n] if hiddens is not None else None for i, n in enumerate(produced)])

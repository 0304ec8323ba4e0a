"""The generation loop: a pool of sentences flows through a fixed number of decode slots.

Continuous batching: the pool (the planner's memory-capped batch) is admitted longest first into
the slots; every ``check_every`` steps (or exactly when the host knows a row must have ended) the
finished rows are harvested and their slots refilled with the next sentences, prefilled together.
When the pool is empty and few rows are left, they move to the front so that steps run on a
smaller bucket of slots. Each row keeps its own prompt (voice), seed, sampling settings, EOS floor
(``min_new``) and forced stop (``max_new``), so its tokens do not depend on its batch-mates, its
slot, or when it was admitted.

Decode steps run through ``StepRunner`` (CUDA graphs on the GPU, eager on CPU). The harvest is
one step behind: which rows are done is copied to the host after each chunk of steps, and read only
once the next chunk is queued, so the GPU has work while the host harvests and refills (rows that
finished meanwhile ride along as done rows: their counters and cache stay put).
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from pipeline.engine.decode_step import StepKind, TokenSpace, run_gpt_step
from pipeline.engine.gpt import FusedLlama, KVCache, additive_mask
from pipeline.engine.host_lists import to_device
from pipeline.engine.prompts import PromptBatch
from pipeline.engine.sampling import RowSampling
from pipeline.engine.slots import Newcomers, SlotShape, SlotState, admit, compact, take_finished
from pipeline.engine.step_graphs import StepRunner, attend_bucket, bucket_for, row_buckets
from pipeline.engine.timing import PhaseClock

log = logging.getLogger(__name__)

OnFinished = Callable[[list[int], list[torch.Tensor]], None]
ADMIT_SHARE = 8  # with rows still running, newcomers are admitted once 1/8 of the slots can take them

__all__ = ["Generated", "RowGroup", "RowLimits", "RowSource", "TokenSpace", "generate", "run_positions",
           "score_tokens"]


@dataclass(frozen=True)
class RowLimits:
    min_new: list[int]  # EOS is masked before this many tokens
    max_new: list[int]  # forced stop after this many tokens


@dataclass(frozen=True)
class RowGroup:
    """Rows that join a running loop (the next batch of a stream): prompts, limits, sampling."""

    prompts: PromptBatch
    limits: RowLimits
    sampling: RowSampling
    lengths: list[int]  # prompts.lengths on the host (reading the device copy would wait for the GPU)


Fits = Callable[[RowGroup], bool]


class RowSource(Protocol):
    """Where a running loop gets more rows once its own are all in slots (a worker's next batch).

    ``fits(group)`` says whether the loop's slots and step graphs can run ``group``; a source
    keeps a group that does not fit for a loop of its own and gives no more to this one."""

    def poll(self, free_slots: int, fits: Fits) -> RowGroup | None:
        """A group ready now, or None (never blocks; may start fetching the next one)."""

    def wait(self, fits: Fits) -> RowGroup | None:
        """The next group, blocking until it is ready; None when no more will come."""

    def exhausted(self) -> bool:
        """Whether no group will come any more (the loop may then pack its last rows)."""


@dataclass(frozen=True)
class Generated:
    """Per row: tokens [T, Q] (EOS excluded, on the CPU), the hidden state that produced each token
    [T, C] (on the device; None when not kept), and whether it stopped at ``max_new``."""

    tokens: list[torch.Tensor]
    hiddens: list[torch.Tensor] | None
    hit_limit: list[bool]


def generate(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch, limits: RowLimits,
             sampling: RowSampling, keep_hiddens: bool = True, check_every: int = 8,
             slots: int | None = None, runner: StepRunner | None = None,
             clock: PhaseClock | None = None, on_finished: OnFinished | None = None,
             source: RowSource | None = None) -> Generated:
    """Generate up to ``max_new`` tokens for every row of ``prompts``, at most ``slots`` at once.

    ``on_finished(rows, hiddens)`` is called at each harvest with the rows that just finished
    (with ``keep_hiddens``), so that their waveforms can be made while the rest generate; their
    hidden states are then not kept in the result.

    ``source``: more rows, taken whenever this loop's own are all in slots and slots come free,
    so that the slots stay full from one batch to the next instead of draining at the end of each
    (rows are numbered on from ``prompts``' in the order their groups arrive)."""
    runner = runner or StepRunner(gpt, space, use_graphs=False)
    clock = clock or PhaseClock(prompts.embeds.device)
    first = RowGroup(prompts=prompts, limits=limits, sampling=sampling, lengths=prompts.lengths.tolist())
    return _Scheduler(gpt, space, first, keep_hiddens, check_every, slots or prompts.rows, runner,
                      clock, on_finished, source).run()


class _Scheduler:
    """Host side of the loop: which row is in which slot, and when each must have ended."""

    def __init__(self, gpt: FusedLlama, space: TokenSpace, first: RowGroup, keep_hiddens: bool,
                 check_every: int, slots: int, runner: StepRunner, clock: PhaseClock,
                 on_finished: OnFinished | None, source: RowSource | None) -> None:
        self.gpt, self.space = gpt, space
        self.on_finished, self.source = on_finished, source
        self.sampling, self.check_every = first.sampling, check_every
        self.runner, self.clock = runner, clock
        self.groups: list[RowGroup | None] = []  # None once all its rows are admitted
        self.group_starts: list[int] = []  # first row of each group
        self.unadmitted: list[int] = []  # rows of each group not yet in a slot
        self.lengths: list[int] = []
        self.min_new: list[int] = []
        self.max_new: list[int] = []
        self.pending: deque[int] = deque()
        capacity = min(slots, first.prompts.rows) if source is None else slots
        self.state: SlotState = runner.slots_for(SlotShape(
            capacity=capacity, positions=max(first.lengths) + max(first.limits.max_new),
            steps=max(first.limits.max_new), codebooks=space.codebooks, vocab=space.vocab,
            keep_hiddens=keep_hiddens))
        self.capacity = capacity
        self.buckets = row_buckets(self.state.shape.capacity)  # the captured ones
        held = self.state.shape.capacity  # may exceed ``capacity`` (slots kept from a bigger batch)
        self.slot_row: list[int | None] = [None] * held
        self.slot_write = [0] * held  # host copy of write_at, exact for rows still alive
        self.slot_left = [0] * held  # steps until the row must have ended (its max_new)
        self.results: dict[int, tuple[torch.Tensor, torch.Tensor | None, bool]] = {}
        self.kv_bytes = gpt.kv_bytes_per_position()
        self.weight_bytes = _parameter_bytes(gpt)
        self.prefix_only = gpt.attention_reads_prefix_only()
        self._add_group(first)

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def _add_group(self, group: RowGroup) -> None:
        start = self.rows
        self.groups.append(group)
        self.group_starts.append(start)
        self.unadmitted.append(group.prompts.rows)
        self.lengths += group.lengths
        self.min_new += group.limits.min_new
        self.max_new += group.limits.max_new
        # longest first, so that the long rows do not start last and leave a tail
        self.pending += sorted(range(start, self.rows), key=lambda r: -self.max_new[r])

    def _fits(self, group: RowGroup) -> bool:
        """Whether ``group`` can join: the slots hold its rows, the step graphs sample its way."""
        shape, mine, theirs = self.state.shape, self.sampling, group.sampling
        return (max(group.limits.max_new) <= shape.steps
                and max(group.lengths) + max(group.limits.max_new) <= shape.positions
                and (mine.greedy, mine.penalised, mine.candidates)
                == (theirs.greedy, theirs.penalised, theirs.candidates))

    def run(self) -> Generated:
        self._refill()
        just_finished: list[int] = []
        waiting: _DoneFlags | None = None  # the last chunk's flags, on their way to the host
        while waiting is not None or self._runnable() or self._waited_for_more():
            queued = None
            if self._runnable():
                live = self._live_rows()
                steps = self._steps_until_check()
                with self.clock.phase("gpt_steps"):
                    self._steps(live, steps)
                queued = _DoneFlags.take(self.state, live, self.slot_row)
            # The steps are queued on the GPU now: hand over the rows of the last harvest (their
            # waveform decode launches), then harvest the chunk before, while these steps run.
            self._hand_over(just_finished)
            just_finished = self._harvest(waiting) if waiting is not None else []
            waiting = queued
            self._refill()
            self._compact_if_sparse(waiting)
        self._hand_over(just_finished)
        return self._collect()

    # ------------------------------------------------------------------------- stepping
    def _live_rows(self) -> int:
        last = max(i for i, row in enumerate(self.slot_row) if row is not None)
        return bucket_for(last + 1, self.buckets)

    def _runnable(self) -> bool:
        """Whether some slot holds a row that may still be generating (rows at their
        ``max_new`` are known to have ended; rows that chose EOS are known only at harvest)."""
        return any(row is not None and left > 0 for row, left in zip(self.slot_row, self.slot_left))

    def _steps_until_check(self) -> int:
        left = [n for n, row in zip(self.slot_left, self.slot_row) if row is not None and n > 0]
        return min(self.check_every, min(left))

    def _steps(self, live: int, steps: int) -> None:
        """``steps`` decode steps; no row reaches its ``max_new`` before the last of them, so every
        row still generating advances one cache position per step (the host's copies run ahead
        for rows that have ended: they are only an upper bound for the attention length)."""
        longest = max(w for w, row in zip(self.slot_write, self.slot_row) if row is not None)
        positions = self.state.shape.positions
        for k in range(steps):
            # With prefix-only attention the length is no part of a step's shape: one graph
            # per live-slot bucket serves every length.
            attend = positions if self.prefix_only else attend_bucket(longest + k + 1, positions)
            self.runner.step(StepKind(rows=live, attend=attend, greedy=self.sampling.greedy,
                                      penalised=self.sampling.penalised,
                                      candidates=self.sampling.candidates))
            self.clock.count_step(self.weight_bytes + live * (longest + k + 1) * self.kv_bytes)
        for i, row in enumerate(self.slot_row):
            if row is not None:
                self.slot_write[i] += steps
                self.slot_left[i] -= steps

    def _waited_for_more(self) -> bool:
        """Every slot is idle: wait for the source's next group (False when none will come)."""
        if self.source is None:
            return False
        group = self.source.wait(self._fits)
        if group is None:
            self.source = None
            return False
        self._add_group(group)
        self._refill()
        return True

    # ------------------------------------------------------------------------- harvest, refill
    def _harvest(self, flags: _DoneFlags) -> list[int]:
        """Collect the rows that ``flags`` saw finished (the one host sync of the loop: the chunk
        after them is already queued); returns them."""
        state = self.state
        ended = [(slot, row, produced, hit) for slot, (row, done, produced, hit)
                 in enumerate(flags.read()) if done and row is not None and self.slot_row[slot] == row]
        if not ended:
            return []
        slots, rows, produced, hits = (list(column) for column in zip(*ended))
        tokens, hiddens = take_finished(state, slots, produced)
        for row, row_tokens, row_hiddens, hit in zip(rows, tokens, hiddens, hits):
            self.results[row] = (row_tokens, row_hiddens, hit)
        for slot in slots:
            self.slot_row[slot] = None
        return rows

    def _hand_over(self, rows: list[int]) -> None:
        if rows and self.on_finished is not None and self.state.hiddens is not None:
            self.on_finished(rows, [self.results[r][1] for r in rows])
            for r in rows:  # handed on: a stream must not keep every row's hidden states
                tokens, _, hit = self.results[r]
                self.results[r] = (tokens, None, hit)

    def _refill(self) -> None:
        free = [i for i in range(self.capacity) if self.slot_row[i] is None]
        if len(free) > len(self.pending) and self.source is not None:
            group = self.source.poll(len(free) - len(self.pending), self._fits)
            if group is not None:
                self._add_group(group)
        take = min(len(free), len(self.pending))
        if take == 0 or self._admission_can_wait(take, len(free)):
            return
        rows = [self.pending.popleft() for _ in range(take)]
        slots = free[:take]
        with self.clock.phase("prefill"):
            for group_rows, group_slots in self._by_group(rows, slots):
                admit(self.state, self._prefill(group_rows, group_slots))
        for slot, row in zip(slots, rows):
            self.slot_row[slot] = row
            self.slot_write[slot] = self.lengths[row]
            self.slot_left[slot] = self.max_new[row]

    def _admission_can_wait(self, take: int, free: int) -> bool:
        """Admit in groups of at least 1/8 of the slots while rows are still running: a stream
        admitting a few rows at every harvest spends 30 % of its GPU time in small prefills
        (two H200s), more than the slots idle while a group gathers."""
        if free == self.capacity or take >= max(1, self.capacity // ADMIT_SHARE):
            return False
        more_coming = len(self.pending) > take or (self.source is not None and not self.source.exhausted())
        return more_coming

    def _by_group(self, rows: list[int], slots: list[int]) -> list[tuple[list[int], list[int]]]:
        """``rows`` and their ``slots`` split by the group each row came in (one prefill each)."""
        split: dict[int, tuple[list[int], list[int]]] = {}
        for row, slot in zip(rows, slots):
            group_rows, group_slots = split.setdefault(bisect.bisect_right(self.group_starts, row) - 1,
                                                       ([], []))
            group_rows.append(row)
            group_slots.append(slot)
        return list(split.values())

    def _prefill(self, rows: list[int], slots: list[int]) -> Newcomers:
        number = bisect.bisect_right(self.group_starts, rows[0]) - 1
        group, start = self.groups[number], self.group_starts[number]
        assert group is not None, "a group's prompts are dropped only once all its rows are in"
        self.unadmitted[number] -= len(rows)
        if self.unadmitted[number] == 0:
            self.groups[number] = None  # its embedded prompts (~150 MB a batch) are not needed again
        prompts = group.prompts
        width = max(self.lengths[r] for r in rows)
        index = to_device([r - start for r in rows], prompts.embeds.device)
        batch = PromptBatch(embeds=prompts.embeds[index, -width:],
                            valid=prompts.valid[index, -width:],
                            positions=prompts.positions[index, -width:],
                            lengths=prompts.lengths[index])
        cache = self.gpt.new_cache(len(rows), width)
        hidden = run_positions(self.gpt, batch, cache)[:, -1]

        def col(values: list[int]) -> torch.Tensor:
            return to_device(values, index.device)

        return Newcomers(slots=slots, cache=cache, last_hidden=hidden, lengths=batch.lengths,
                         min_new=col([self.min_new[r] for r in rows]),
                         max_new=col([self.max_new[r] for r in rows]),
                         sampling=group.sampling.select(index))

    def _compact_if_sparse(self, waiting: _DoneFlags | None) -> None:
        """With nothing left to admit, move the live rows to the front once a smaller bucket
        holds them, so that steps stop paying for empty slots (``waiting`` follows the move)."""
        if self.pending or (self.source is not None and not self.source.exhausted()):
            return  # more rows are coming into the free slots
        occupied = [i for i, row in enumerate(self.slot_row) if row is not None]
        if not occupied or bucket_for(len(occupied), self.buckets) >= self._live_rows():
            return
        compact(self.state, occupied)
        if waiting is not None:
            waiting.follow(occupied)
        n = len(occupied)
        for name in ("slot_row", "slot_write", "slot_left"):
            values = getattr(self, name)
            moved = [values[i] for i in occupied]
            setattr(self, name, moved + [None if name == "slot_row" else 0] * (len(values) - n))
        log.debug("compacted slots: %d live rows now at the front", n)

    def _collect(self) -> Generated:
        rows = self.rows
        tokens_device = [self.results[r][0] for r in range(rows)]
        sizes = [t.shape[0] for t in tokens_device]
        joined = torch.cat(tokens_device).cpu() if rows else torch.zeros(0)
        tokens = list(torch.split(joined, sizes))
        hiddens = ([self.results[r][1] for r in range(rows)]
                   if self.state.hiddens is not None else None)
        return Generated(tokens=[t.clone() for t in tokens], hiddens=hiddens,
                         hit_limit=[self.results[r][2] for r in range(rows)])


class _DoneFlags:
    """Which of the first ``live`` slots were done after a chunk of steps, how many tokens each
    kept and whether it hit ``max_new``: copied to pinned host memory behind the chunk, read at
    the next harvest. ``slot_rows`` is which row each slot held when they were taken."""

    def __init__(self, host: torch.Tensor, event: torch.cuda.Event | None,
                 slot_rows: list[int | None]) -> None:
        self.host, self.event, self.slot_rows = host, event, slot_rows
        self.order = list(range(len(slot_rows)))  # slot now -> slot when taken

    @staticmethod
    def take(state: SlotState, live: int, slot_row: list[int | None]) -> _DoneFlags:
        flags = torch.stack([state.done[:live].long(), state.produced[:live],
                             state.hit_limit[:live].long()])
        if not flags.is_cuda:
            return _DoneFlags(flags, None, list(slot_row))
        host = torch.empty(flags.shape, dtype=flags.dtype, pin_memory=True)
        host.copy_(flags, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return _DoneFlags(host, event, list(slot_row))

    def follow(self, moved: list[int]) -> None:
        """Slots ``moved`` went to the front, in that order (``compact``)."""
        self.order = [self.order[i] for i in moved] + [-1] * (len(self.order) - len(moved))

    def read(self) -> list[tuple[int | None, bool, int, bool]]:
        """Per slot now: (row when taken, done, tokens kept, hit max_new)."""
        if self.event is not None:
            self.event.synchronize()
        done, produced, hit = self.host.tolist()
        live = len(done)
        return [(self.slot_rows[t], bool(done[t]), produced[t], bool(hit[t]))
                if 0 <= t < live else (None, False, 0, False) for t in self.order]


def _parameter_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in module.parameters())


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


def score_tokens(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch,
                 forced: torch.Tensor) -> torch.Tensor:
    """Teacher forcing through the decode path that generation runs (prefill, admission into
    slots, their KV cache — int8 where it is — and the decode attention): logits [B, T, Q, V]
    for tokens t_0..t_{T-1}, where ``forced`` [B, T-1, Q] holds t_0..t_{T-2}. The prompt's last
    hidden state predicts t_0; each forced token then runs one position as a sampled one would."""
    rows, steps = prompts.rows, forced.shape[1] + 1
    device = prompts.embeds.device
    state = SlotState(gpt, SlotShape(
        capacity=rows, positions=int(prompts.lengths.max()) + steps, steps=steps,
        codebooks=space.codebooks, vocab=space.vocab, keep_hiddens=False))
    cache = gpt.new_cache(rows, prompts.width)
    last_hidden = run_positions(gpt, prompts, cache)[:, -1]
    everyone = torch.arange(rows, device=device)
    steps_col = torch.full((rows,), steps, dtype=torch.int64, device=device)
    admit(state, Newcomers(slots=list(range(rows)), cache=cache, last_hidden=last_hidden,
                           lengths=prompts.lengths, min_new=steps_col, max_new=steps_col,
                           sampling=state.sampling.select(everyone)))
    kind = StepKind(rows=rows, attend=state.shape.positions, greedy=True, penalised=False)
    alive = torch.ones(rows, dtype=torch.bool, device=device)
    logits = [space.logits(state.hidden)]
    for k in range(steps - 1):
        run_gpt_step(gpt, space, state, kind, forced[:, k].to(device), alive)
        logits.append(space.logits(state.hidden))
    return torch.stack(logits, 1)

"""The generation loop: a pool of sentences flows through a fixed number of decode slots.

Continuous batching: the pool (the planner's memory-capped batch) is admitted longest first into
the slots; every ``check_every`` steps (or exactly when the host knows a row must have ended) the
finished rows are harvested and their slots refilled with the next sentences, prefilled together.
When the pool is empty and few rows are left, they move to the front so that steps run on a
smaller bucket of slots. Each row keeps its own prompt (voice), seed, sampling settings, EOS floor
(``min_new``) and forced stop (``max_new``), so its tokens do not depend on its batch-mates, its
slot, or when it was admitted.

The scheduler here decides (which row goes into which slot, when newcomers are admitted — the
``SchedulingPolicy``'s rule —, when to compact); ``loop_runner.LoopRunner`` executes on the device.
Decode steps run through ``StepRunner`` (CUDA graphs on the GPU, eager on CPU). The harvest is
one step behind: which rows are done is copied to the host after each chunk of steps, and read only
once the next chunk is queued, so the GPU has work while the host harvests and refills (rows that
finished meanwhile ride along as done rows: their counters and cache stay put).
"""

from __future__ import annotations

import bisect
import logging
from collections import deque

import torch

from pipeline.engine.decode_step import TokenSpace
from pipeline.engine.gpt import FusedLlama
from pipeline.engine.loop_runner import DoneFlags, LoopRunner
from pipeline.engine.prompts import PromptBatch
from pipeline.engine.rows import Generated, OnFinished, RowGroup, RowLimits, RowSource
from pipeline.engine.sampling import RowSampling
from pipeline.engine.slots import SlotShape
from pipeline.engine.step_graphs import StepRunner, bucket_for, row_buckets
from pipeline.engine.timing import PhaseClock
from pipeline.scheduling import SchedulingPolicy

log = logging.getLogger(__name__)

__all__ = ["Generated", "OnFinished", "RowGroup", "RowLimits", "RowSource", "TokenSpace", "generate"]


def generate(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch, limits: RowLimits,
             sampling: RowSampling, keep_hiddens: bool = True, check_every: int = 8,
             slots: int | None = None, runner: StepRunner | None = None,
             clock: PhaseClock | None = None, on_finished: OnFinished | None = None,
             source: RowSource | None = None, policy: SchedulingPolicy | None = None) -> Generated:
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
    shape = _slot_shape(first, space, keep_hiddens, slots or prompts.rows, source)
    device = LoopRunner(gpt, space, runner, clock, shape)
    return _Scheduler(device, first, shape.capacity, check_every, clock, on_finished, source,
                      policy or SchedulingPolicy()).run()


def _slot_shape(first: RowGroup, space: TokenSpace, keep_hiddens: bool, slots: int,
                source: RowSource | None) -> SlotShape:
    capacity = min(slots, first.prompts.rows) if source is None else slots
    return SlotShape(capacity=capacity, positions=max(first.lengths) + max(first.limits.max_new),
                     steps=max(first.limits.max_new), codebooks=space.codebooks, vocab=space.vocab,
                     keep_hiddens=keep_hiddens)


class _Scheduler:
    """Host side of the loop: which row is in which slot, and when each must have ended."""

    def __init__(self, device: LoopRunner, first: RowGroup, capacity: int, check_every: int,
                 clock: PhaseClock, on_finished: OnFinished | None, source: RowSource | None,
                 policy: SchedulingPolicy) -> None:
        self.device, self.clock, self.policy = device, clock, policy
        self.on_finished, self.source = on_finished, source
        self.sampling, self.check_every = first.sampling, check_every
        self.groups: list[RowGroup | None] = []  # None once all its rows are admitted
        self.group_starts: list[int] = []  # first row of each group
        self.unadmitted: list[int] = []  # rows of each group not yet in a slot
        self.lengths: list[int] = []
        self.min_new: list[int] = []
        self.max_new: list[int] = []
        self.pending: deque[int] = deque()
        self.capacity = capacity  # the slots this loop fills (``device`` may hold more)
        self.buckets = row_buckets(device.shape.capacity)  # the captured ones
        held = device.shape.capacity  # may exceed ``capacity`` (slots kept from a bigger batch)
        self.slot_row: list[int | None] = [None] * held
        self.slot_write = [0] * held  # host copy of write_at, exact for rows still alive
        self.slot_left = [0] * held  # steps until the row must have ended (its max_new)
        self.results: dict[int, tuple[torch.Tensor, torch.Tensor | None, bool]] = {}
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
        shape, mine, theirs = self.device.shape, self.sampling, group.sampling
        return (max(group.limits.max_new) <= shape.steps
                and max(group.lengths) + max(group.limits.max_new) <= shape.positions
                and (mine.greedy, mine.penalised, mine.candidates)
                == (theirs.greedy, theirs.penalised, theirs.candidates))

    def run(self) -> Generated:
        self._refill()
        just_finished: list[int] = []
        waiting: DoneFlags | None = None  # the last chunk's flags, on their way to the host
        while waiting is not None or self._runnable() or self._waited_for_more():
            queued = None
            if self._runnable():
                live = self._live_rows()
                steps = self._steps_until_check()
                with self.clock.phase("gpt_steps"):
                    self._steps(live, steps)
                queued = self.device.done_flags(live, self.slot_row)
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
        self.device.steps(live, steps, longest, self.sampling)
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
    def _harvest(self, flags: DoneFlags) -> list[int]:
        """Collect the rows that ``flags`` saw finished (the one host sync of the loop: the chunk
        after them is already queued); returns them."""
        ended = [(slot, row, produced, hit) for slot, (row, done, produced, hit)
                 in enumerate(flags.read()) if done and row is not None and self.slot_row[slot] == row]
        if not ended:
            return []
        slots, rows, produced, hits = (list(column) for column in zip(*ended))
        tokens, hiddens = self.device.take_finished(slots, produced)
        for row, row_tokens, row_hiddens, hit in zip(rows, tokens, hiddens, hits):
            self.results[row] = (row_tokens, row_hiddens, hit)
        for slot in slots:
            self.slot_row[slot] = None
        return rows

    def _hand_over(self, rows: list[int]) -> None:
        if rows and self.on_finished is not None and self.device.keeps_hiddens:
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
                self._prefill(group_rows, group_slots)
        for slot, row in zip(slots, rows):
            self.slot_row[slot] = row
            self.slot_write[slot] = self.lengths[row]
            self.slot_left[slot] = self.max_new[row]

    def _admission_can_wait(self, take: int, free: int) -> bool:
        """The policy's rule (``SchedulingPolicy.admission_can_wait``): newcomers wait for a
        group's worth of free slots while rows still run and more are coming."""
        more_coming = len(self.pending) > take or (self.source is not None and not self.source.exhausted())
        return self.policy.admission_can_wait(take, free, self.capacity, more_coming)

    def _by_group(self, rows: list[int], slots: list[int]) -> list[tuple[list[int], list[int]]]:
        """``rows`` and their ``slots`` split by the group each row came in (one prefill each)."""
        split: dict[int, tuple[list[int], list[int]]] = {}
        for row, slot in zip(rows, slots):
            group_rows, group_slots = split.setdefault(bisect.bisect_right(self.group_starts, row) - 1,
                                                       ([], []))
            group_rows.append(row)
            group_slots.append(slot)
        return list(split.values())

    def _prefill(self, rows: list[int], slots: list[int]) -> None:
        number = bisect.bisect_right(self.group_starts, rows[0]) - 1
        group, start = self.groups[number], self.group_starts[number]
        assert group is not None, "a group's prompts are dropped only once all its rows are in"
        self.unadmitted[number] -= len(rows)
        if self.unadmitted[number] == 0:
            self.groups[number] = None  # its embedded prompts (~150 MB a batch) are not needed again
        self.device.prefill(group.prompts, [r - start for r in rows], slots,
                            [self.lengths[r] for r in rows], [self.min_new[r] for r in rows],
                            [self.max_new[r] for r in rows], group.sampling)

    def _compact_if_sparse(self, waiting: DoneFlags | None) -> None:
        """With nothing left to admit, move the live rows to the front once half the slots up to
        the last live one would hold them, so that steps stop paying for empty slots (``waiting``
        follows the move). At halvings, not at every smaller bucket: a move copies each live
        row's whole cache (~75 MB a slot of 2,304 positions), and since ended rows attend to
        nothing it saves only GEMM rows; rows ending in slot order need none to reach the
        smaller buckets."""
        if self.pending or (self.source is not None and not self.source.exhausted()):
            return  # more rows are coming into the free slots
        occupied = [i for i, row in enumerate(self.slot_row) if row is not None]
        if not occupied or 2 * len(occupied) > occupied[-1] + 1:
            return
        self.device.compact(occupied)
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
        hiddens = [self.results[r][1] for r in range(rows)] if self.device.keeps_hiddens else None
        return Generated(tokens=[t.clone() for t in tokens], hiddens=hiddens,
                         hit_limit=[self.results[r][2] for r in range(rows)])

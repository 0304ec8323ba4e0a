"""The scheduling policy: how pending sentences become batches, in which order the queue hands them
out, and when a decode loop admits newcomers — one owner for every knob, torch-free.

The planner (``pipeline/batching.py``), the queue order (``storage/repo/batches.py``), a worker's
stream (``jobs/batches/stream.py``) and the engine's admission (``pipeline/engine/generation.py``)
all ask a ``SchedulingPolicy``; changing how work is scheduled means changing this module and its
test. The policy is sized from the device it runs on (``for_device``): the memory a worker
measured, never an assumed card.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

GPU_BATCH_ROWS = 1024  # continuous batching keeps a big pool's slots full (docs/benchmarks.md)
CPU_BATCH_ROWS = 16


class QueueKey(str, Enum):
    """What the queue sorts queued batches by, most significant first (``SchedulingPolicy.queue_order``)."""

    PRIORITY = "priority"  # higher priority first
    SUBMISSION = "submission"  # the earlier submission first (the books of one submit share it)
    LARGER_BOOK = "larger_book"  # of books submitted together, the larger first
    PLAN = "plan"  # the earlier plan first (a plan's batches share their creation time)
    LONGEST = "longest"  # the longest sentences first
    OLDEST = "oldest"  # the older batch first (ties)


@dataclass(frozen=True)
class SchedulingPolicy:
    """Every knob of scheduling, with the reason for its default.

    Book after book, not the longest sentences of every book first (``queue_order``): taken longest
    first across books, every book finished in the stream's last second and all of their encoding
    came after the GPUs were done. Submissions in turn, and of the books submitted together (one
    submit command, one bulk run) the larger first, each book's waves plan after plan: the shelf's
    last seconds go to its smallest book, whose last chapters are soon encoded, while the larger
    books' last chapters are encoded beside its speaking. Spoken smallest first, a 22-hour book
    came last and left 7 of its 20 chapters (~30,000 s) to encode after the last sentence (9-14 s
    on a 16-core H200 host). Within a plan the longest go first: a row runs as long as its
    sentence (up to ~8 s on an H200), and a stream ends only when its last row does.
    """

    batch_rows: int = GPU_BATCH_ROWS  # most sentences in one batch; also a GPU worker's decode slots
    memory_cap_bytes: int | None = None  # the smallest live worker's usable memory; None: unknown yet
    # With rows still running, newcomers are admitted once 1/8 of the slots can take them: a stream
    # admitting a few rows at every harvest spends 30 % of its GPU time in small prefills (two
    # H200s), more than the slots idle while a group gathers.
    admit_share: int = 8
    # The queue's last batches run as pieces of this many rows when several workers share it: a
    # streaming worker claims once 1/8 of its 1,024 slots are free, so a piece is what it admits.
    piece_rows: int = 128
    # With more than this many batches queued, a stream claims its next one as soon as a slot is
    # free (not once an admission's worth is); with fewer left (the queue's end pieces) a batch
    # claimed early might wait in one worker while another has nothing to do, and each is recorded
    # only once its sentences are measured, so that a book's last batch leaves its assembly
    # nothing to measure.
    deep_queue: int = 4
    # A book is planned in this many stretches of whole chapters, so that its first chapters are
    # spoken, and can be assembled, while the rest of it is.
    waves_per_book: int = 8
    # A run plans a book of more sentences than this (~10 hours) in two goes: its first waves before
    # it speaks, the rest beside their speaking (``jobs.plan.PlanBeside``), so that planning all of
    # a long book does not hold its first sentence back (18,000 sentences: 0.33 s, the first two
    # waves 0.20 s on the build machine; 181,000: 6.2 s and 1.9 s); two waves keep the slots full
    # until the rest is planned. A shorter book is planned whole (its plan is quick).
    opening_waves: int = 2
    plan_beside_from: int = 8000
    # A book's first batch takes this many of its first wave's shortest sentences beside its
    # longest: all are admitted at once, and the first sentence spoken is then a short one, not
    # the shortest of 1,024 long ones, while the person who started the run waits for it (on an
    # H200 the first rows finished 0.14 s after the slots instead of 0.73-0.78 s).
    lead_rows: int = 16
    # A batch whose holder died goes back in its place. It runs alone, never in a stream, once
    # suspect: when a death was its doing (it alone was held: ``solo_deaths``) or it was held by
    # this many holders that died. One death among a stream's batches is nobody's in particular
    # (a kill, a crash of another batch): run alone one at a time, a killed book's batches fell
    # behind every book submitted after it.
    suspect_after_deaths: int = 2
    queue_order: tuple[QueueKey, ...] = (QueueKey.PRIORITY, QueueKey.SUBMISSION, QueueKey.LARGER_BOOK,
                                         QueueKey.PLAN, QueueKey.LONGEST, QueueKey.OLDEST)

    @classmethod
    def for_device(cls, gpu: bool, memory_cap_bytes: int | None = None,
                   batch_rows: int | None = None) -> SchedulingPolicy:
        """The policy for a worker on a GPU (or not) with ``memory_cap_bytes`` usable (None:
        not measured yet); ``batch_rows`` overrides the device's default batch size."""
        rows = batch_rows or (GPU_BATCH_ROWS if gpu else CPU_BATCH_ROWS)
        return cls(batch_rows=rows, memory_cap_bytes=memory_cap_bytes)

    def with_learned_rows(self, rows: int | None) -> SchedulingPolicy:
        """No batch larger than ``rows``: the size a worker had to halve to after running out of
        memory."""
        return replace(self, batch_rows=min(self.batch_rows, rows)) if rows else self

    def admit_at(self, slots: int) -> int:
        """Free slots at which newcomers are admitted (and the next batch fetched) while rows
        still run."""
        return max(1, slots // self.admit_share)

    def admission_can_wait(self, take: int, free: int, capacity: int, more_coming: bool) -> bool:
        """Whether ``take`` newcomers for ``free`` of ``capacity`` slots should wait for more:
        only while rows still run, the group is under ``admit_at`` and more rows are coming."""
        if free == capacity or take >= self.admit_at(capacity):
            return False
        return more_coming

    def pieces(self, rows: int) -> int:
        """Into how many pieces a batch of ``rows`` at the queue's end is cut (1: kept whole)."""
        count = rows // self.piece_rows
        return count if count >= 2 else 1

    def queue_is_deep(self, queued_batches: int) -> bool:
        """Whether ``queued_batches`` are enough for a stream to claim its next batch as soon as a
        slot is free, and to record batches without waiting for their measures."""
        return queued_batches > self.deep_queue

    def is_suspect(self, holder_deaths: int, solo_deaths: int) -> bool:
        """Whether a batch runs alone rather than in a stream (``suspect_after_deaths``)."""
        return solo_deaths > 0 or holder_deaths >= self.suspect_after_deaths

    def waves(self, assemble_ahead: bool = True) -> int:
        """Stretches of chapters each book is planned in."""
        return self.waves_per_book if assemble_ahead else 1

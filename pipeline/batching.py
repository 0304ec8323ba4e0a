"""Batch planning: every pending sentence, sorted globally by length, cut into memory-capped batches.

Pure: no torch, no database. The engine's memory model supplies the per-batch estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.scheduling import SchedulingPolicy
from pipeline.types import Batch, PlannedSentence


@dataclass(frozen=True)
class MemoryModel:
    """Peak memory of a batch = fixed + per_row_position * rows * positions (+ activations).

    ``positions`` is the longest row's prompt + new tokens, since a batch pads to its longest row.
    Calibrated per device by the engine; these defaults are conservative for fp16 full-size ChatTTS.
    """

    fixed_bytes: int = 1_200_000_000  # weights, Decoder/Vocos workspace, allocator slack
    bytes_per_row_position: int = 160_000  # KV cache (61 kB fp16) + activations/logits per position

    def estimate(self, rows: int, positions: int) -> int:
        return self.fixed_bytes + self.bytes_per_row_position * rows * positions


@dataclass(frozen=True)
class PlanLimits:
    memory_cap_bytes: int | None  # the smallest worker's cap; None: not measured yet (rows only)
    max_rows: int = 256  # never more rows than this in one batch
    workers: int = 1  # synthesis workers that will share the batches (see _split_the_last_batches)
    ends_queue: bool = True  # False: more sentences are on their way (another book being read)
    lead_rows: int = 0  # the shortest sentences that ride in the first batch (a book's first wave)
    policy: SchedulingPolicy = field(default_factory=SchedulingPolicy)  # the size of the end pieces

    @classmethod
    def of(cls, policy: SchedulingPolicy, workers: int = 1, ends_queue: bool = True) -> PlanLimits:
        return cls(memory_cap_bytes=policy.memory_cap_bytes, max_rows=policy.batch_rows,
                   workers=workers, ends_queue=ends_queue, policy=policy)


def plan_batches(
    sentences: Sequence[PlannedSentence],
    limits: PlanLimits,
    memory: MemoryModel = MemoryModel(),
    estimate: Callable[[int, int], int] | None = None,
) -> list[Batch]:
    """Sort by (priority desc, length desc) and cut into batches under the memory cap.

    Every sentence lands in exactly one batch; a sentence too large even alone gets a batch of its
    own (the engine then fails it alone with a clear error). Batches come back in the order to run
    them: priority classes first to last, and within a class the longest batch first, so that with
    several GPU workers the long batches start early and the short ones fill in at the end
    (longest-processing-time order) instead of one worker finishing the longest batch alone.

    With ``limits.lead_rows`` the first batch also takes that many of the shortest sentences
    (``SchedulingPolicy.lead_rows``: a book's first sentence spoken sooner).

    Cutting starts at the longest sentences, so the part batch left over is one of the shortest.
    (Cut from the short end, the remainder would be the longest sentences: 417 rows keep 1,024
    slots a third full for 1,183 steps, at 1,040x real time where full batches run ~2,000x.)

    The sort is over every book planned together (the design's global sort): a GPU worker streams
    its batches through its decode slots (jobs/batches/stream.py), and a row runs as long as its
    sentence (up to ~8 s on an H200), so the rows taken last must be the short ones. Books read at
    different times (a shelf, read one book at a time) are planned one by one, and streams take
    those plans in the order they were made (storage/repo.next_queued_batch), so each book is
    assembled while the next is spoken: two 13-hour M4B books on one H200 are done 11-13 s sooner
    than with one order over all plans, and no slower to synthesized (docs/benchmarks.md).
    """
    estimate = estimate or memory.estimate
    ordered = sorted(sentences, key=lambda s: (-s.priority, -_positions(s), s.id))
    lead = _lead(ordered, limits, estimate)
    taken = {s.id for s in lead}
    batches: list[Batch] = []
    current: list[PlannedSentence] = []
    for sentence in (s for s in ordered if s.id not in taken):
        longest = _positions(current[0]) if current else _positions(sentence)  # the first is the longest
        room = len(current) + 1 + (len(lead) if not batches else 0)  # the first batch keeps room for the lead
        cap = limits.memory_cap_bytes
        fits = cap is None or estimate(room, longest) <= cap
        same_class = not current or current[0].priority == sentence.priority
        if current and (not fits or room > limits.max_rows or not same_class):
            batches.append(_close([*current, *(lead if not batches else ())], estimate))
            current = [sentence]
        else:
            current.append(sentence)
    if current:  # never empty: the lead is under half of its class
        batches.append(_close([*current, *(lead if not batches else ())], estimate))
    by_id = {s.id: s for s in ordered}
    return _split_the_last_batches(batches, limits, estimate, by_id)


def _lead(ordered: list[PlannedSentence], limits: PlanLimits,
          estimate: Callable[[int, int], int]) -> list[PlannedSentence]:
    """The first batch's lead (``PlanLimits.lead_rows``, at most a quarter of a batch): the
    shortest sentences of the first priority class, when that class has at least twice as many
    (fewer fill one batch anyway) and the longest sentence fits beside them."""
    rows = min(limits.lead_rows, limits.max_rows // 4)
    first_class = [s for s in ordered if s.priority == ordered[0].priority] if ordered else []
    if not 0 < rows < len(first_class) // 2:
        return []
    cap = limits.memory_cap_bytes
    if cap is not None and estimate(1 + rows, _positions(first_class[0])) > cap:
        return []
    return first_class[len(first_class) - rows:]


def in_waves(rows: Sequence[Any], waves: int, left: Mapping[int, float] | None = None,
             first: int | None = None) -> list[tuple[list[Any], bool]]:
    """A book is planned in waves (``SchedulingPolicy.waves_per_book``), each sorted by length on
    its own, so that its first chapters are spoken, and assembled, while the rest of it is:
    ``rows`` (each with its ``job_id``, ``chapter_id`` and ``max_new_tokens``, each book's in
    reading order) in ``waves`` stretches of whole chapters of about equal length per book (fewer
    when a book has fewer chapters), book after book, each with whether it opens its book; with
    ``waves`` 1, one stretch of every book (the global sort).

    ``left``: books partly planned already, each with the share of its GPT steps still to plan:
    what is left is cut about where the whole book's waves would be, none of them opening it.
    ``first``: only each book's first so many waves (a run plans the rest while it speaks them)."""
    if waves <= 1:
        return [(list(rows), True)]
    left = left or {}
    books: dict[int, list[Any]] = {}
    for row in rows:
        books.setdefault(getattr(row, "job_id", 0), []).append(row)
    stretches = []
    for job_id, book in books.items():
        share = left.get(job_id, 1.0)
        stretches += [(stretch, share == 1.0 and number == 0)
                      for number, stretch in enumerate(_book_in_waves(book, waves, share, first))]
    return stretches


def _book_in_waves(book: list[Any], waves: int, share: float = 1.0, first: int | None = None) -> list[list[Any]]:
    """``book``'s rows in stretches (the first ``first`` only); ``share``: what they are of the whole
    book (its last part), cut where the whole book's stretches would be, counted from where its plan
    stopped."""
    rest = sum(row.max_new_tokens for row in book)
    total = rest / share
    done = total - rest
    before = math.floor(done * waves / total + 1e-9) if total else 0  # stretches the plan before made
    stretches: list[list[Any]] = [[]]
    chapter = None
    for row in book:
        # a new stretch only where a chapter starts, once this one has its share of the book
        if row.chapter_id != chapter and stretches[-1] and done >= total * (before + len(stretches)) / waves:
            if len(stretches) == first:
                break
            stretches.append([])
        chapter = row.chapter_id
        stretches[-1].append(row)
        done += row.max_new_tokens
    return stretches


def _split_the_last_batches(batches: list[Batch], limits: PlanLimits, estimate: Callable[[int, int], int],
                            by_id: dict[int, PlannedSentence]) -> list[Batch]:
    """With several workers, the last ``limits.workers`` batches (the shortest) run as pieces.

    Workers take batches as they come free, so one may still run its last batch after the others
    are done: up to a whole batch of idle for the rest (1.2 s of 15 s per GPU on two H200s).
    Pieces bound that wait by a piece. A GPU worker streams its batches through its decode slots
    (jobs/batches/stream.py), so a piece costs a claim, not a drain of the slots, and a piece of
    ~128 rows is what a stream admits at once. With halves (~200-500 rows) one of two H200s
    claims the last two and ends 0.7 s after the other, their rows waiting in its pool for free
    slots (docs/benchmarks.md). The piece's size is the policy's (``SchedulingPolicy.pieces``).
    Every ``n``-th sentence goes to each piece, so
    all keep the batch's spread of lengths. One worker runs whole batches, and so do batches
    that more will follow (``PlanLimits.ends_queue`` off).
    """
    workers = limits.workers
    if workers < 2 or not limits.ends_queue or not batches:
        return batches
    head, tail = batches[:-workers], batches[-workers:]
    pieces: list[Batch] = []
    for batch in tail:
        count = limits.policy.pieces(len(batch.sentence_ids))
        if count < 2:
            pieces.append(batch)
            continue
        for k in range(count):
            part = batch.sentence_ids[k::count]
            longest = max(_positions(by_id[i]) for i in part)
            pieces.append(Batch(sentence_ids=part, estimated_bytes=estimate(len(part), longest),
                                longest_positions=longest, priority=batch.priority))
    return head + pieces


def _positions(sentence: PlannedSentence) -> int:
    return sentence.prompt_tokens + sentence.max_new_tokens


def _close(rows: list[PlannedSentence], estimate: Callable[[int, int], int]) -> Batch:
    longest = _positions(rows[0])  # sentences come longest first: the batch pads to the first
    return Batch(sentence_ids=tuple(s.id for s in rows), estimated_bytes=estimate(len(rows), longest),
                 longest_positions=longest, priority=rows[0].priority)

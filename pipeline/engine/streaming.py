"""A worker's batches as one stream through the decode slots (``Engine.synthesize_stream``).

Run one at a time, every batch ends with its slots draining: the last rows of a batch run on a
few slots while the rest idle, and on two GPUs each worker's last batch decides when it stops.
As a stream, the next batch is fetched while the current one still runs and its sentences take
the slots as they come free, so the slots stay full until the queue is empty.

``RequestStream`` is the loop's ``RowSource``: ``more()`` (the worker's claim of its next batch:
a database round trip, then tokenizing) runs in a thread of its own, started once enough slots
are free or about to be, so that a batch is not claimed long before this worker can run it (the
other worker may be idle by then) — or, while ``fetch_early()`` says the queue is deep (other
workers have plenty left to take), as soon as any slot is free: a batch's rows are of one length
and end together, and a claim that waits on the database (SQLite's write lock: the other
worker's record, an ingest) would leave the slots idle meanwhile. Embedding the prompts is GPU
work: it is done on the loop's thread when the group is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from pipeline.engine.rows import Fits, RowGroup
from pipeline.scheduling import SchedulingPolicy
from pipeline.types import SynthesisRequest

if TYPE_CHECKING:
    from pipeline.engine.prompts import PromptRow

MoreRequests = Callable[[], Sequence[SynthesisRequest] | None]
FetchEarly = Callable[[], bool]


class RowPreparer(Protocol):
    """How requests become rows of the loop (``Engine``): checked and tokenized on the fetch
    thread, then embedded on the loop's."""

    def prompt_rows(self, requests: Sequence[SynthesisRequest]) -> list[PromptRow]: ...

    def row_group(self, requests: Sequence[SynthesisRequest], rows: list[PromptRow]) -> RowGroup: ...


class RequestStream:
    """Groups of requests from ``more()``, numbered on from ``first_index`` in arrival order: the
    loop's row ``r`` is the caller's request ``first_index + r``."""

    def __init__(self, preparer: RowPreparer, more: MoreRequests, slots: int,
                 first: Sequence[SynthesisRequest], first_index: int,
                 fetch_early: FetchEarly | None = None, policy: SchedulingPolicy | None = None) -> None:
        self._preparer, self._more = preparer, more
        self._fetch_early = fetch_early or (lambda: False)
        # fetched once the loop could admit it (the policy's ``admit_at``): claimed neither long
        # before this worker can run it nor after its slots went idle
        self._fetch_at = (policy or SchedulingPolicy()).admit_at(slots)
        self._fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="next-batch")
        self._fetching: Future[tuple[list[SynthesisRequest], list[PromptRow]] | None] | None = None
        self._ended = False  # more() said no more, or a group did not fit this loop
        self.leftover: list[SynthesisRequest] = []  # a group that did not fit: the next loop's first
        self.requests: list[SynthesisRequest] = list(first)  # the loop's rows, in its numbering
        self.first_index = first_index

    def close(self) -> None:
        self._fetcher.shutdown(wait=True)

    # ------------------------------------------------------------------- RowSource
    def poll(self, free_slots: int, fits: Fits) -> RowGroup | None:
        if self._fetching is None:
            if free_slots >= self._fetch_at or (free_slots > 0 and self._fetch_early()):
                self._start_fetch()
            return None
        if not self._fetching.done():
            return None
        return self._take(fits)

    def wait(self, fits: Fits) -> RowGroup | None:
        if self._fetching is None:
            self._start_fetch()
        return self._take(fits)

    def exhausted(self) -> bool:
        return self._ended

    # ------------------------------------------------------------------- inside
    def _start_fetch(self) -> None:
        if not self._ended:
            self._fetching = self._fetcher.submit(self._fetch)

    def _fetch(self) -> tuple[list[SynthesisRequest], list[PromptRow]] | None:
        """On the fetch thread: the next requests, checked and tokenized (host work only)."""
        requests = list(self._more() or ())
        if not requests:
            return None
        return requests, self._preparer.prompt_rows(requests)

    def _take(self, fits: Fits) -> RowGroup | None:
        fetching, self._fetching = self._fetching, None
        fetched = fetching.result() if fetching is not None else None  # the claim's error ends the stream
        if fetched is None:
            self._ended = True
            return None
        requests, rows = fetched
        group = self._preparer.row_group(requests, rows)
        if not fits(group):  # another sampling mode, or longer than these slots: a loop of its own
            self.leftover, self._ended = requests, True
            return None
        self.requests += requests
        return group

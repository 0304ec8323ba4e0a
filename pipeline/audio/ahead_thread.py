"""A book's chapters prepared ahead on a thread of their own while the book is spoken: stretches
handed over as they are spoken, prepared one at a time in reading order (``ahead.BookAhead``).

When the speaking ends, a stretch not yet begun is left to the assembly: on every core and at
full priority it does those chapters sooner than this thread would before the assembly began.
Best effort throughout: a stretch that fails is logged and left to the assembly, which reports
what is wrong with it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from pipeline.audio.ahead import BookAhead
from pipeline.audio.assembly_types import ChapterAudio
from pipeline.audio.prepared import PreparedChapter

log = logging.getLogger(__name__)

LoadChapters = Callable[[int, int], Sequence[ChapterAudio]]  # the chapters at positions first..end-1


class AheadThread:
    """Prepares ``book``'s chapters as they are handed over; ``load`` reads them when their turn
    comes; ``label`` names the book in the log (``job=7``)."""

    def __init__(self, book: BookAhead, load: LoadChapters, label: str) -> None:
        self.book, self._load, self._label = book, load, label
        self._asked = book.next_position  # chapters handed over so far (a prefix of the book)
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assemble-ahead")

    def hand_over(self, end: int) -> Future[None] | None:
        """The book's chapters up to position ``end`` (exclusive) are spoken: prepare the new ones
        (their stretch's future; None when there is none new)."""
        with self._lock:
            if end <= self._asked:
                return None
            first, self._asked = self._asked, end
            return self._thread.submit(self._prepare, first, end)

    def _prepare(self, first: int, end: int) -> None:
        if self.book.next_position != first:  # an earlier stretch failed: the assembly does the rest
            return
        try:
            self.book.prepare(self._load(first, end))
        except Exception as exc:  # noqa: BLE001 - the assembly will do these chapters itself
            log.warning("%s: chapters %d-%d not assembled ahead (%s: %s); the assembly does them",
                        self._label, first + 1, end, type(exc).__name__, exc)

    def finish(self) -> list[PreparedChapter]:
        """The speaking is over: the stretch under way ends, those not begun are the assembly's.
        The chapters prepared, in reading order."""
        self._thread.shutdown(wait=True, cancel_futures=True)
        return list(self.book.prepared)

    def abandon(self) -> None:
        """Stop preparing (the run stops): what is under way ends, nothing more starts."""
        self._thread.shutdown(wait=False, cancel_futures=True)

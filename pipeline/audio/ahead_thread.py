"""A book's chapters prepared ahead on threads of their own while the book is spoken, for a caller
without a job table (``pipeline.bench assembly-tail``): stretches handed over as they are spoken,
prepared in reading order (``ahead.BookAhead``).

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
from pipeline.audio.prepared import LaidOut, PreparedChapter

log = logging.getLogger(__name__)

LoadChapters = Callable[[int, int], Sequence[ChapterAudio]]  # the chapters at positions first..end-1


class AheadThread:
    """Prepares ``book``'s chapters as they are handed over; ``load`` reads them when their turn
    comes; ``label`` names the book in the log (``job=7``). Each stretch is laid out on one thread
    while the one before it encodes on another (as ``jobs/assemble_ahead.prepare_spoken`` does)."""

    def __init__(self, book: BookAhead, load: LoadChapters, label: str) -> None:
        self.book, self._load, self._label = book, load, label
        self._asked = book.next_position  # chapters handed over so far (a prefix of the book)
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assemble-ahead")
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode-ahead")
        self._finishing = threading.Event()  # the speaking is over: nothing more is encoded
        self._encoding: Future[None] | None = None  # the last stretch handed to the encoder

    def hand_over(self, end: int) -> Future[None] | None:
        """The book's chapters up to position ``end`` (exclusive) are spoken: prepare the new ones
        (their stretch's laying out's future; None when there is none new)."""
        with self._lock:
            if end <= self._asked:
                return None
            first, self._asked = self._asked, end
            return self._thread.submit(self._lay_out, first, end)

    def _lay_out(self, first: int, end: int) -> None:
        if self.book.next_to_lay_out != first:  # an earlier stretch failed: the assembly does the rest
            return
        try:
            stretch = self.book.lay_out(self._load(first, end), keep_going=lambda: not self._finishing.is_set())
        except Exception as exc:  # noqa: BLE001 - the assembly will do these chapters itself
            self._failed(first, end, exc)
            return
        if stretch is None:  # the book was spoken meanwhile: the assembly stitches these itself
            return
        if self._encoding is not None:  # one stretch laid out ahead of the encodes, no more
            self._encoding.result()
        with self._lock:
            if not self._finishing.is_set():  # else the assembly, on every core, encodes it
                self._encoding = self._encoder.submit(self._encode, stretch)

    def _encode(self, stretch: LaidOut) -> None:
        try:
            self.book.encode(stretch)
        except Exception as exc:  # noqa: BLE001 - the assembly will do these chapters itself
            self._failed(stretch.first, stretch.first + len(stretch.chapters), exc)

    def _failed(self, first: int, end: int, exc: Exception) -> None:
        log.warning("%s: chapters %d-%d not assembled ahead (%s: %s); the assembly does them",
                    self._label, first + 1, end, type(exc).__name__, exc)

    def finish(self) -> list[PreparedChapter]:
        """The speaking is over: the encodes under way end; stretches not begun, and one laid out
        but not yet encoding, are the assembly's. The chapters prepared, in reading order."""
        with self._lock:
            self._finishing.set()
        self._thread.shutdown(wait=True, cancel_futures=True)
        self._encoder.shutdown(wait=True)
        return list(self.book.prepared)

    def abandon(self) -> None:
        """Stop preparing (the run stops): what is under way ends, nothing more starts."""
        self._finishing.set()
        self._thread.shutdown(wait=False, cancel_futures=True)
        self._encoder.shutdown(wait=False, cancel_futures=True)

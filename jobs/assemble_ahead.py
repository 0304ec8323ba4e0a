"""Assemble ahead: while an embedded run speaks its book, the chapters already spoken are
assembled (measured, levelled, stitched, encoded for the M4B) on a thread of their own, so that
after the last batch only the last chapters are left for ``assemble.assemble_job``.

The book is planned in waves of whole chapters (``plan.plan_pending(waves=...)``), so that its
first chapters are spoken before the rest. After each recorded batch the run asks ``poll()``;
the chapters newly spoken from the start of the book on are prepared in order
(``pipeline/audio/ahead.py``). Encodes run at lower priority than the threads that feed the GPU.
Best effort: a chapter that could not be prepared is left to the assembly, which does it as it
always did (and reports what is wrong with it). A resumed run starts with nothing prepared.
"""

from __future__ import annotations

import logging
import shutil
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from jobs.assemble import assembly_options, chapters_to_assemble
from jobs.runtime import Runtime
from pipeline.types import GPT_STEPS_PER_SECOND, SAMPLE_RATE
from storage import repo

if TYPE_CHECKING:
    from pipeline.audio import ChapterAudio
    from pipeline.audio.ahead import PreparedChapter

log = logging.getLogger(__name__)

WAVES = 8  # a book spoken in this many stretches of chapters: the last one is the assembly's tail
ENCODE_NICENESS = 10  # ffmpeg and stitch helpers beside the GPU yield to the threads that feed it
RESERVED_CORES = 4  # left to the threads that feed the GPU and write and measure its sentences


def encode_threads() -> int:
    """Encoders beside the GPU: every core but the few that the GPU's feeding, writing and
    measuring threads need."""
    from pipeline.audio.parallel import worker_count

    return max(1, worker_count(0) - RESERVED_CORES)


class AssembleAhead:
    """The chapters of embedded job ``job_id`` prepared so far, and the thread that prepares them."""

    def __init__(self, rt: Runtime, job_id: int) -> None:
        from pipeline.audio.ahead import BookAhead
        from pipeline.audio.stitch_helpers import set_helper_niceness

        self.rt, self.job_id = rt, job_id
        with rt.read_session() as session:
            job = repo.get_job(session, job_id)
            options = assembly_options(job)
            chapters = repo.chapter_count(session, job_id)
            steps = repo.job_token_budget(session, job_id)
        work_dir = rt.artifacts.work_dir(job_id)
        shutil.rmtree(work_dir, ignore_errors=True)  # what an earlier attempt left is not this run's
        set_helper_niceness(ENCODE_NICENESS)
        # pieces cut for a wave (not the book): each wave's encodes spread over the encoding
        # threads, or a wave waits on its longest piece and the next waves queue behind it (seen
        # on an H200: 750-s pieces took ~5 s a wave, and the last chapters were done 30 s late)
        wave = round(steps / GPT_STEPS_PER_SECOND * SAMPLE_RATE / WAVES)
        self.book = BookAhead(work_dir, replace(options, threads=encode_threads()), chapters, wave,
                              nice=ENCODE_NICENESS)
        self._asked = 0  # chapters handed to the thread so far (a prefix of the book)
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assemble-ahead")
        self._work: list[Future[None]] = []

    def poll(self) -> None:
        """Hand the chapters newly spoken from the book's start on (never its last) to the thread.
        Called as each batch is recorded; it never fails the recording."""
        try:
            with self.rt.read_session() as session:
                spoken = min(repo.spoken_chapter_prefix(session, self.job_id), self.book.chapters - 1)
        except Exception as exc:  # noqa: BLE001 - best effort: the assembly does what is not done ahead
            log.warning("job=%s: could not look for spoken chapters (%s)", self.job_id, exc)
            return
        with self._lock:
            if spoken <= self._asked:
                return
            first, self._asked = self._asked, spoken
            self._work.append(self._thread.submit(self._prepare, first, spoken))

    def _prepare(self, first: int, end: int) -> None:
        if self.book.next_position != first:  # an earlier stretch failed: the assembly does the rest
            return
        try:
            self.book.prepare(self._chapters(first, end))
        except Exception as exc:  # noqa: BLE001 - the assembly will do these chapters itself
            log.warning("job=%s: chapters %d-%d not assembled ahead (%s: %s); the assembly does them",
                        self.job_id, first + 1, end, type(exc).__name__, exc)

    def _chapters(self, first: int, end: int) -> list[ChapterAudio]:
        with self.rt.read_session() as session:
            return chapters_to_assemble(self.rt, session, self.job_id)[first:end]

    def finish(self) -> list[PreparedChapter]:
        """Wait for what was handed over; the chapters prepared, in reading order."""
        self._thread.shutdown(wait=True)
        return list(self.book.prepared)

    def abandon(self) -> None:
        """Stop preparing (the run stops): what is under way ends, nothing more starts."""
        self._thread.shutdown(wait=False, cancel_futures=True)

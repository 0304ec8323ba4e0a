"""Assemble ahead: while a book is spoken, the chapters already spoken are assembled (measured,
levelled, stitched, encoded for the M4B and every per-chapter format and read-along EPUB asked
for), so that after its last batch only the last stretch of chapters is left for
``assemble.assemble_job``, and then the mux.

The book is planned in waves of whole chapters (``plan.plan_pending``), so that its first
chapters are spoken before the rest; the chapters newly spoken from the start of the book on are
prepared in order (``pipeline/audio/ahead.py``). Encodes run at lower priority than the threads
that feed the GPU, on all cores but a few. Once the whole book is spoken, nothing more is
prepared ahead: the assembly does the rest on every core at once. Best effort: a chapter that
could not be prepared is left to the assembly, which does it as it always did (and reports what
is wrong with it).

Two homes, one policy:

- an embedded run (``AssembleAhead``): a thread of its own, asked after each recorded batch; a
  resumed run starts with nothing prepared;
- a cluster: after each recorded batch the GPU worker sends ``tts_jobs.assemble_ahead`` for the
  batch's books to the CPU queue, whose task (``prepare_ahead``) prepares what is newly spoken in
  the book's work directory and keeps the list there; the book's assembly task waits for a
  preparation under way and takes that list (``take_prepared``). A per-book lock file (``flock``)
  keeps one of them in the work directory at a time: the CPU workers of a book share a host, or a
  file system whose locks hold across hosts.
"""

from __future__ import annotations

import fcntl
import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from jobs.assemble import assembly_options, book_metadata, chapters_to_assemble
from jobs.plan import WAVES
from jobs.runtime import Runtime
from jobs.settings import process_environment
from pipeline.types import GPT_STEPS_PER_SECOND, SAMPLE_RATE
from storage import repo
from storage.models import JobState

if TYPE_CHECKING:
    from pipeline.audio import ChapterAudio
    from pipeline.audio.ahead import BookAhead, PreparedChapter

log = logging.getLogger(__name__)


def book_ahead(rt: Runtime, job_id: int, prepared: Sequence[PreparedChapter] = ()) -> BookAhead:
    """Job ``job_id``'s chapters as prepared so far (``prepared``), ready to prepare more."""
    from pipeline.audio.ahead import ENCODE_NICENESS, BookAhead, encode_threads
    from pipeline.audio.stitch_helpers import set_helper_environment, set_helper_niceness

    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        options = assembly_options(job)
        chapters = repo.chapter_count(session, job_id)
        steps = repo.job_token_budget(session, job_id)
        metadata = book_metadata(rt, job)
    set_helper_environment(process_environment())
    set_helper_niceness(ENCODE_NICENESS)
    # pieces cut for a wave (not the book): each wave's encodes spread over the encoding threads,
    # or a wave waits on its longest piece and the next waves queue behind it (seen on an H200:
    # 750-s pieces took ~5 s a wave, and the last chapters were done 30 s late)
    wave = round(steps / GPT_STEPS_PER_SECOND * SAMPLE_RATE / WAVES)
    return BookAhead(rt.artifacts.work_dir(job_id), replace(options, threads=encode_threads()), chapters,
                     wave, nice=ENCODE_NICENESS, prepared=prepared, metadata=metadata)


def spoken_chapters(rt: Runtime, job_id: int, chapters: int) -> int:
    """How many of the book's first chapters may be prepared ahead: those spoken, while the book
    is still being spoken (none once it all is: the assembly, on every core at once, does what
    is left sooner than a preparation on fewer cores followed by the assembly would)."""
    with rt.read_session() as session:
        spoken = repo.spoken_chapter_prefix(session, job_id)
    return 0 if spoken >= chapters else spoken


def chapters_between(rt: Runtime, job_id: int, first: int, end: int | None) -> list[ChapterAudio]:
    with rt.read_session() as session:
        return chapters_to_assemble(rt, session, job_id)[first:end]


class AssembleAhead:
    """The chapters of embedded job ``job_id`` prepared so far, and the thread that prepares them."""

    def __init__(self, rt: Runtime, job_id: int) -> None:
        from pipeline.audio.ahead_thread import AheadThread

        self.rt, self.job_id = rt, job_id
        shutil.rmtree(rt.artifacts.work_dir(job_id), ignore_errors=True)  # an earlier attempt's is not this run's
        self.book = book_ahead(rt, job_id)
        self._thread = AheadThread(self.book, lambda first, end: chapters_between(rt, job_id, first, end),
                                   f"job={job_id}")

    def poll(self) -> None:
        """Hand the chapters newly spoken from the book's start on to the thread (``spoken_chapters``).
        Called as each batch is recorded; it never fails the recording."""
        try:
            spoken = spoken_chapters(self.rt, self.job_id, self.book.chapters)
        except Exception as exc:  # noqa: BLE001 - best effort: the assembly does what is not done ahead
            log.warning("job=%s: could not look for spoken chapters (%s)", self.job_id, exc)
            return
        self._thread.hand_over(spoken)

    def finish(self) -> list[PreparedChapter]:
        """The book is spoken: the stretch under way ends, the rest is the assembly's; the chapters
        prepared, in reading order."""
        return self._thread.finish()

    def abandon(self) -> None:
        """Stop preparing (the run stops): what is under way ends, nothing more starts."""
        self._thread.abandon()


# ------------------------------------------------------------------------------ in a cluster


def prepare_ahead(rt: Runtime, job_id: int) -> int:
    """The cluster's task: prepare the chapters of job ``job_id`` spoken since the last time, in
    its work directory, while the job is still being spoken; returns how many were prepared.
    Another task preparing the same book already does what this one would (it looks again for
    newly spoken chapters before it stops)."""
    from pipeline.audio.ahead import load_prepared, save_prepared, still_the_same

    done = 0
    with _book_lock(rt, job_id, wait=False) as held:
        if not held or not _still_spoken(rt, job_id):
            return 0
        work_dir = rt.artifacts.work_dir(job_id)
        # what is kept of an earlier attempt: the chapters whose sentences are still the same
        prepared = still_the_same(chapters_between(rt, job_id, 0, None), load_prepared(work_dir))
        if not prepared:  # what an attempt that kept no list left there is not this one's
            shutil.rmtree(work_dir, ignore_errors=True)
        book = book_ahead(rt, job_id, prepared)
        while _still_spoken(rt, job_id):
            first, end = book.next_position, spoken_chapters(rt, job_id, book.chapters)
            if end <= first:
                break
            try:
                book.prepare(chapters_between(rt, job_id, first, end))
            except Exception as exc:  # noqa: BLE001 - the assembly does these chapters itself
                log.warning("job=%s: chapters %d-%d not assembled ahead (%s: %s); the assembly does them",
                            job_id, first + 1, end, type(exc).__name__, exc)
                break
            save_prepared(work_dir, book.prepared)
            done += end - first
    return done


def take_prepared(rt: Runtime, job_id: int) -> list[PreparedChapter]:
    """For job ``job_id``'s assembly: the chapters prepared ahead in its work directory, once a
    preparation under way has ended (a task that comes later finds the job assembling and leaves
    the work directory alone)."""
    from pipeline.audio.ahead import load_prepared

    with _book_lock(rt, job_id, wait=True):
        return load_prepared(rt.artifacts.work_dir(job_id))


def _still_spoken(rt: Runtime, job_id: int) -> bool:
    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        return job is not None and job.job_state == JobState.SYNTHESIZING


@contextmanager
def _book_lock(rt: Runtime, job_id: int, wait: bool) -> Iterator[bool]:
    """The book's assemble-ahead lock (beside its work directory); yields whether it is held."""
    path = rt.artifacts.work_dir(job_id).parent / "assemble-ahead.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

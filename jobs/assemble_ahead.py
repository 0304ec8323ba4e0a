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

Two homes, one policy (``prepare_spoken``), each in a process of its own beside the GPU's, whose
threads queue its work op by op and must not wait on the interpreter lock behind an assembly's
Python (``pipeline/engine/host_threads.py``):

- an embedded run: a child process, asked after each recorded batch (``assemble_ahead_child.py``);
  a resumed run starts with nothing prepared;
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
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from jobs.assemble import assembly_options, book_metadata, chapters_to_assemble
from jobs.plan import scheduling_policy
from jobs.runtime import Runtime
from jobs.settings import process_environment
from storage import repo
from storage.models import JobState

if TYPE_CHECKING:
    from pipeline.audio import ChapterAudio
    from pipeline.audio.ahead import BookAhead
    from pipeline.audio.prepared import PreparedChapter

log = logging.getLogger(__name__)


def book_ahead(rt: Runtime, job_id: int, prepared: Sequence[PreparedChapter] = ()) -> BookAhead:
    """Job ``job_id``'s chapters as prepared so far (``prepared``), ready to prepare more."""
    from pipeline.audio.ahead import ENCODE_NICENESS, BookAhead, encode_threads
    from pipeline.audio.stitch_helpers import set_helper_environment, set_helper_niceness

    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        options = assembly_options(job)
        chapters = repo.chapter_count(session, job_id)
        metadata = book_metadata(rt, job)
    set_helper_environment(process_environment())
    set_helper_niceness(ENCODE_NICENESS)
    return BookAhead(rt.artifacts.work_dir(job_id), replace(options, threads=encode_threads()), chapters,
                     nice=ENCODE_NICENESS, prepared=prepared, metadata=metadata)


def spoken_chapters(rt: Runtime, job_id: int, chapters: int) -> int:
    """How many of the book's first chapters may be prepared ahead: those spoken, while the book
    is still being spoken (none once it all is: the assembly, on every core at once, does what
    is left sooner than a preparation on fewer cores followed by the assembly would)."""
    with rt.read_session() as session:
        spoken = repo.spoken_chapter_prefix(session, job_id)
    return 0 if spoken >= chapters else spoken


def book_waves(rt: Runtime) -> int:
    """The waves of chapters a book is planned in (``pipeline.batching.in_waves``): how its preparation is cut."""
    return scheduling_policy(rt.settings).waves_per_book


def stretch_chapters(chapters: int, waves: int) -> int:
    """The most chapters one stretch prepares: a wave's worth. Behind the speaking (encoding a
    20-hour book takes the host's every core about as long as the GPU takes to speak it), the
    chapters spoken while a stretch was prepared make the next one; taken all at once, a stretch
    begun seconds before the last sentence held the assembly 8.5 s on an H200 (15 chapters of
    60), where the assembly, on every core at once, would have begun on the chapters after a
    wave's worth."""
    return max(1, math.ceil(chapters / waves))


def chapters_between(rt: Runtime, job_id: int, first: int, end: int | None) -> list[ChapterAudio]:
    with rt.read_session() as session:
        return chapters_to_assemble(rt, session, job_id, first, end)


# ------------------------------------------------------------------------------ in a cluster


def prepare_ahead(rt: Runtime, job_id: int) -> int:
    """The cluster's task: prepare the chapters of job ``job_id`` spoken since the last time, in
    its work directory, while the job is still being spoken; returns how many were prepared.
    Another task preparing the same book already does what this one would (it looks again for
    newly spoken chapters before it stops)."""
    from pipeline.audio.layout import clear_work_dir
    from pipeline.audio.prepared import load_prepared, still_the_same

    with book_lock(rt, job_id, wait=False) as held:
        if not held or not _still_spoken(rt, job_id):
            return 0
        work_dir = rt.artifacts.work_dir(job_id)
        # what is kept of an earlier attempt: the chapters whose sentences are still the same
        prepared = still_the_same(chapters_between(rt, job_id, 0, None), load_prepared(work_dir))
        if not prepared:  # what an attempt that kept no list left there is not this one's
            clear_work_dir(work_dir)
        done, _ = prepare_spoken(rt, job_id, book_ahead(rt, job_id, prepared))
        return done


def prepare_spoken(rt: Runtime, job_id: int, book: BookAhead) -> tuple[int, bool]:
    """Both homes' step: the chapters of job ``job_id`` newly spoken from ``book``'s next one on
    prepared, stretch after stretch, while the book is still being spoken, and the list kept in
    its work directory after each. Each stretch is laid out (measured, stitched) while the one
    before it encodes: one after the other, the steps before the encodes left cores idle and the
    preparation of a 25.8-hour book lagged its speaking by a stretch on an H200 host. A stretch
    laid out once the speaking has ended is not encoded, nor stitched when it ended while its
    chapters were measured (``book`` is not used again): the assembly waits for the stretch under
    way, not for work it would drop. Returns how many were prepared, and whether every stretch was
    (after one that was not, the assembly does the rest)."""
    done, encoding, waves = 0, None, book_waves(rt)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode-stretch") as encoder:
        try:
            while _still_spoken(rt, job_id):
                first = book.next_to_lay_out
                end = min(spoken_chapters(rt, job_id, book.chapters), first + stretch_chapters(book.chapters, waves))
                if end <= first:
                    break
                stretch = book.lay_out(chapters_between(rt, job_id, first, end),
                                       keep_going=lambda: _still_spoken(rt, job_id))
                if stretch is None:  # spoken meanwhile: the assembly, on every core, does it
                    break
                done += _kept(rt, job_id, book, encoding)
                encoding = None
                if not _still_spoken(rt, job_id):  # spoken meanwhile: the assembly, on every core, encodes it
                    break
                encoding = (encoder.submit(book.encode, stretch), len(stretch.chapters))
            done += _kept(rt, job_id, book, encoding)
        except Exception as exc:  # noqa: BLE001 - the assembly does these chapters itself
            log.warning("job=%s: chapters from %d on not assembled ahead (%s: %s); the assembly does them",
                        job_id, book.next_position + 1, type(exc).__name__, exc)
            return done, False
    return done, True


def _kept(rt: Runtime, job_id: int, book: BookAhead, encoding: tuple[Future[None], int] | None) -> int:
    """The stretch being encoded done (its error raised) and the list kept; its chapter count."""
    from pipeline.audio.prepared import save_prepared

    if encoding is None:
        return 0
    encoded, chapters = encoding
    encoded.result()
    save_prepared(rt.artifacts.work_dir(job_id), book.prepared)
    return chapters


def take_prepared(rt: Runtime, job_id: int) -> list[PreparedChapter]:
    """For job ``job_id``'s assembly: the chapters prepared ahead in its work directory, once a
    preparation under way has ended (a task that comes later finds the job assembling and leaves
    the work directory alone)."""
    from pipeline.audio.prepared import load_prepared

    with book_lock(rt, job_id, wait=True):
        return load_prepared(rt.artifacts.work_dir(job_id))


def _still_spoken(rt: Runtime, job_id: int) -> bool:
    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        return job is not None and job.job_state == JobState.SYNTHESIZING


@contextmanager
def book_lock(rt: Runtime, job_id: int, wait: bool) -> Iterator[bool]:
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

"""Ingest: read a queued job's stored book into chapters and sentences, and record them — the
chapters the job chose, each sentence with its role (who reads it) and its length limits at the
job's pace, its text with the job's pronunciations.

The book is parsed outside any database transaction (seconds for a big one): on SQLite a
transaction holds the write lock, and GPU workers could not record their batches meanwhile.
The chapters are then recorded only if no other delivery recorded them first.
"""

from __future__ import annotations

import importlib
import logging
import zlib
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, configure_mappers

from jobs.book_names import as_given
from jobs.choices.options import recorded_options
from jobs.lifecycle import fail_job
from jobs.runtime import Runtime
from pipeline import lengths
from pipeline.errors import BookError
from pipeline.metadata_record import metadata_record
from pipeline.types import Sentence
from storage import repo
from storage.models import Job, JobState

if TYPE_CHECKING:
    from pipeline.types import Book, Chapter

log = logging.getLogger(__name__)

ChapterRows = list[tuple["Chapter", list[repo.NewSentence]]]


def ingest_job(rt: Runtime, job_id: int) -> bool:
    """Read the stored book into chapters and sentences. True when the job is read and going on
    (planning finds nothing to do for a job that is already being assembled)."""
    from pipeline.ingest import read_book
    from pipeline.text import split_sentences

    with rt.session() as session:
        ready = _ingested_already(session, job_id)
        if ready is None:
            job = repo.get_job(session, job_id)
            source_path, source_name = rt.artifacts.resolve(job.source_path), job.source_name
            book_sha256, options = job.source_sha256, recorded_options(job)
        session.commit()
    if ready is not None:
        return ready
    try:
        book = as_given(read_book(source_path, options.reading()), source_path, source_name)
        # the rows too (token limits, seeds) before the transaction: it holds SQLite's write lock
        speaking = options.speaking(book)
        chapters = [(chapter, [_new_sentence(book_sha256, chapter.index, s, options.speed)
                               for s in split_sentences(chapter, speaking)])
                    for chapter in book.chapters]
    except BookError as exc:
        fail_job(rt, job_id, f"{source_name}: {exc.problem}" + (f" ({exc.fix})" if exc.fix else ""))
        return False
    with rt.session() as session:
        ready = _ingested_already(session, job_id, for_update=True)
        if ready is not None:
            session.commit()
            return ready
        _record_book(rt, session, repo.get_job(session, job_id), book, chapters)
        repo.move_job(session, job_id, JobState.SYNTHESIZING, only_from=[JobState.QUEUED, JobState.INGESTING])
        session.commit()
    log.info("job=%s: %d chapters, %d sentences", job_id, len(chapters), sum(len(s) for _, s in chapters))
    return True


NOT_GOING_ON = 3  # the child's exit status when the job is not read and going on (a bad book: failed)


def ingest_beside(rt: Runtime, job_id: int) -> bool:
    """``ingest_job`` in a child process (``child_process.py``), while this process loads the
    engine: the book is read on a core of its own, and the engine's load does not wait on the
    interpreter lock behind it. A child that fails otherwise fails the run with its last words."""
    from jobs.child_process import Child

    child = Child(rt.settings, __name__, f"main({job_id:d})")
    code = child.wait()
    if code in (0, NOT_GOING_ON):
        return code == 0
    raise RuntimeError(f"reading the book failed (exit status {code}): {child.last_words or 'no message'}")


def main(job_id: int) -> None:
    """The child: read job ``job_id``'s book (exit status 0: read and going on)."""
    from jobs.child_process import child_runtime

    try:
        going_on = ingest_job(child_runtime(), job_id)
    except KeyboardInterrupt:  # Ctrl-C reached the whole run: it says so itself
        raise SystemExit(130) from None
    except Exception as exc:  # the run fails with these words (one line: no traceback to relay)
        log.error("%s: %s", type(exc).__name__, (str(exc).splitlines() or [""])[0])
        raise SystemExit(1) from None
    raise SystemExit(0 if going_on else NOT_GOING_ON)


def prepare_ingest(rt: Runtime) -> None:
    """Load what reading a book needs (the readers, the text stage, the ORM's mappers) and open this
    process's database connection: a worker's first book is then read as fast as the next (cold,
    the first takes ~0.2 s more). Reads nothing."""
    for module in ("pipeline.ingest", "pipeline.text"):
        importlib.import_module(module)
    configure_mappers()
    with rt.sessions.kw["bind"].connect():  # pooled for the first task; no transaction, no lock
        pass


def sentence_seed(book_sha256: str, chapter_index: int, sentence_index: int) -> int:
    """A stable per-sentence seed, from the book's content and the sentence's place in it: a
    retried, resumed or re-batched sentence sounds the same, and so does the same book run again."""
    return zlib.crc32(f"{book_sha256}:{chapter_index}:{sentence_index}".encode()) & 0x7FFFFFFF


def _ingested_already(session: Session, job_id: int, for_update: bool = False) -> bool | None:
    """None while the job still waits for its book to be read; else whether it is read and going
    on (a job gone or ended is not; one whose chapters another delivery recorded is)."""
    job = repo.get_job(session, job_id, for_update=for_update)
    if job is None or job.job_state not in (JobState.QUEUED, JobState.INGESTING):
        return job is not None and job.job_state in (JobState.SYNTHESIZING, JobState.ASSEMBLING)
    if repo.has_chapters(session, job_id):  # a previous delivery got this far
        repo.move_job(session, job_id, JobState.SYNTHESIZING, only_from=[JobState.QUEUED, JobState.INGESTING])
        return True
    return None


def _record_book(rt: Runtime, session: Session, job: Job, book: Book, chapters: ChapterRows) -> None:
    meta = book.metadata
    job.title = meta.title or job.title
    job.authors = list(meta.authors)
    job.language = meta.language
    job.warnings = list(book.warnings)
    job.book_metadata = {**metadata_record(meta), "cover_path": None}
    if meta.cover:
        job.book_metadata = {**job.book_metadata,
                             "cover_path": str(rt.artifacts.store_cover(job.id, meta.cover, meta.cover_mime))}
    repo.add_chapters(session, job.id, [(chapter.index, chapter.title, rows) for chapter, rows in chapters])


def _new_sentence(book_sha256: str, chapter_index: int, sentence: Sentence, speed: int) -> repo.NewSentence:
    floor, cap = lengths.token_limits(sentence.text, speed)
    seed = sentence_seed(book_sha256, chapter_index, sentence.index)
    return repo.NewSentence(index=sentence.index, paragraph_index=sentence.paragraph_index,
                            text=sentence.text, seed=seed, min_new_tokens=floor, max_new_tokens=cap,
                            role=sentence.role)

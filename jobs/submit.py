"""Submit: check a book and its options, store a copy of the book and record a queued job.

Everything is checked here, before anything is recorded or any model loads, so that bad input
ends with one line naming the problem and the fix.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from jobs.options import JobOptions, check_formats
from jobs.runtime import Runtime
from jobs.voices import resolve_voice
from pipeline.errors import BookError
from pipeline.files import file_sha256
from storage.models import Job

if TYPE_CHECKING:
    from pipeline.types import Book

log = logging.getLogger(__name__)


def validate_book(path: Path) -> Book:
    """Read the book the way the job will, so that bad input is reported before anything is queued."""
    from pipeline.ingest import SUPPORTED_EXTENSIONS, read_book

    if not path.exists():
        raise BookError(path, "no such file", "check the path")
    if not path.is_file():
        raise BookError(path, "not a file", "pass a book file, not a folder")
    if path.suffix.lower() not in SUPPORTED_EXTENSIONS:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise BookError(path, f"unsupported file type {path.suffix or '(none)'}",
                        f"convert it to one of {supported}")
    return read_book(path)


def check_options(rt: Runtime, options: JobOptions) -> None:
    """Raises TtsJobsError (VoiceError for the voice) for an option no job could be read with."""
    check_formats(options.formats)
    with rt.read_session() as session:
        resolve_voice(session, options.voice)


def submit_book(rt: Runtime, path: Path, options: JobOptions) -> int:
    """Validate a book, store a copy in the data directory and record a queued job. Returns its id."""
    path = Path(path)
    book = validate_book(path)
    check_formats(options.formats)
    with rt.session() as session:
        job = add_job(rt, session, path, book, options, file_sha256(path))
        session.commit()
        log.info("job=%s: submitted %s (%s)", job.id, path, book.format)
        return job.id


def add_job(rt: Runtime, session: Session, path: Path, book: Book, options: JobOptions, sha256: str) -> Job:
    """Record a queued job for a validated book and store its copy; the caller commits."""
    job = Job(source_name=path.name, source_path="", source_sha256=sha256,
              book_format=book.format, title=book.metadata.title or path.stem,
              authors=list(book.metadata.authors), language=book.metadata.language,
              priority=options.priority, voice_name=options.voice,
              voice_embedding=resolve_voice(session, options.voice),
              options=options.to_json(), warnings=list(book.warnings))
    session.add(job)
    session.flush()
    job.source_path = str(rt.artifacts.store_source(job.id, path))
    return job

"""Submit: check a book and its options, store a copy of the book and record a queued job.

Everything is checked here, before anything is recorded or any model loads, so that bad input
ends with one line naming the problem and the fix.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy.orm import Session

from jobs.book_folders import claim_book_folder, default_out_root, release_book_folder
from jobs.choices.delivery import DIALOGUE_VOICE_KEY
from jobs.choices.options import JobOptions, check_choices
from jobs.choices.voices import resolve_voice
from jobs.runtime import Runtime
from pipeline.errors import BookError
from pipeline.files import file_sha256
from storage import repo
from storage.models import Job, JobMode, utcnow

if TYPE_CHECKING:
    from pipeline.ingest.options import IngestOptions
    from pipeline.types import Book

log = logging.getLogger(__name__)


def validate_book(path: Path, reading: IngestOptions | None = None) -> Book:
    """Read the book the way the job will (``reading``: the job's reading options), so that bad
    input is reported before anything is queued."""
    from pipeline.ingest import SUPPORTED_EXTENSIONS, book_extension, read_book

    if not path.exists():
        raise BookError(path, "no such file", "check the path")
    if not path.is_file():
        raise BookError(path, "not a file", "pass a book file, not a folder")
    if book_extension(path) not in SUPPORTED_EXTENSIONS:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise BookError(path, f"unsupported file type {path.suffix or '(none)'}",
                        f"convert it to one of {supported}")
    return read_book(path, reading)


def check_options(rt: Runtime, options: JobOptions) -> None:
    """Raises OptionError (VoiceError for a voice) for an option no job could be read with."""
    check_choices(options)
    with rt.read_session() as session:
        resolve_voice(session, options.voice)
        if options.dialogue_voice is not None:
            resolve_voice(session, options.dialogue_voice, option="--dialogue-voice")


class Validated(NamedTuple):
    """A book as ``validate_book`` read it, and its file's sha256."""

    book: Book
    sha256: str


def submit_book(rt: Runtime, path: Path, options: JobOptions, mode: JobMode = JobMode.CLUSTER,
                runner: str | None = None, checked: Validated | None = None,
                submitted_at: datetime | None = None) -> int:
    """Validate a book, store a copy in the data directory and record a queued job. Returns its id.
    ``runner``: the process (host:pid) that runs an embedded job. ``checked``: the book as this
    process validated it with these options already (not read again). ``submitted_at``: see
    ``add_job``."""
    path = Path(path)
    check_choices(options)
    book, sha256 = checked or Validated(validate_book(path, options.reading()), file_sha256(path))
    with rt.session() as session:
        job = add_job(rt, session, path, book, options, sha256, mode, submitted_at)
        if runner is not None:
            job.runner, job.heartbeat_at = runner, utcnow()
        session.commit()
        log.info("job=%s: submitted %s (%s)", job.id, path, book.format)
        return job.id


def add_job(rt: Runtime, session: Session, path: Path, book: Book, options: JobOptions, sha256: str,
            mode: JobMode = JobMode.CLUSTER, submitted_at: datetime | None = None) -> Job:
    """Record a queued job for a validated book, claim its output folder (``OUT/<Author>/<Title>``)
    and store its copy; the caller commits. ``submitted_at`` (else now) is its ``created_at``: the
    books of one submit command or bulk run share it, and the queue speaks them largest first
    (``QueueKey.LARGER_BOOK``)."""
    title = book.metadata.title or path.stem
    out_root = options.out_dir or default_out_root(rt.settings.data_dir)
    folder, _ = claim_book_folder(out_root, title, book.metadata.authors, sha256, options)
    try:
        job = Job(source_name=path.name, source_path="", source_sha256=sha256,
                  book_format=book.format, title=title,
                  authors=list(book.metadata.authors), language=book.metadata.language,
                  priority=options.priority, voice_name=options.voice,
                  voice_embedding=resolve_voice(session, options.voice),
                  options={**options.to_json(), "out_root": str(out_root), "out_dir": str(folder),
                           **_dialogue_voice(session, options)},
                  warnings=list(book.warnings), mode=mode.value, created_at=submitted_at or utcnow())
        session.add(job)
        session.flush()
        job.source_path = str(rt.artifacts.store_source(job.id, path))
    except BaseException:
        release_book_folder(folder)
        raise
    return job


def _dialogue_voice(session: Session, options: JobOptions) -> dict[str, str]:
    """The dialogue voice's spec, frozen with the job as the narrator's is (later voice edits do
    not change a job); nothing without a dialogue voice."""
    if options.dialogue_voice is None:
        return {}
    return {DIALOGUE_VOICE_KEY: resolve_voice(session, options.dialogue_voice, option="--dialogue-voice")}


def withdraw_job(rt: Runtime, job_id: int) -> None:
    """Remove a job that was recorded but never started (its message could not be sent): its row,
    its stored book and, if nothing else is in it, its output folder."""
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            return
        folder = Path(job.options["out_dir"]) if (job.options or {}).get("out_dir") else None
        repo.delete_job(session, job_id)
        session.commit()
    rt.artifacts.remove_job(job_id)
    if folder is not None:
        release_book_folder(folder)

"""Nightly bulk runs: submit every new book in an inbox folder, once per content.

A book is known by the SHA-256 of its bytes, so a renamed or copied file is recognised. Each
submitted book gets one row in ``bulk_entries`` whose ``sha256`` is UNIQUE. The row is inserted
*first*, in the same transaction as the job. Two runs that overlap (cron fired twice, a slow night)
therefore cannot both submit a book: the second insert waits for the first transaction and then
fails with an IntegrityError. That book is then reported as skipped.

Layout under the output folder, one folder per book (jobs/book_folders.py: the layout audiobook
players expect)::

    OUT/Bram Stoker/Dracula/Dracula.m4b              (named by the audio stage from the title)
    OUT/Bram Stoker/Dracula/Dracula.report.json      (jobs/bulk_reports.py, once the job is final)

    submit_inbox ─> (workers) ─> bulk_reports.wait_for_jobs ─> write_report
                                 bulk_reports.write_pending_reports (next run: books finished since)
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError

from jobs.book_folders import release_book_folder
from jobs.bulk_reports import book_dir_of
from jobs.choices.options import BULK_MIN_AGE_SECONDS, JobOptions
from jobs.cluster.broker import queue_or_withdraw
from jobs.runtime import Runtime
from jobs.submit import add_job, check_options, validate_book, withdraw_job
from pipeline.errors import BookError, TtsJobsError
from pipeline.files import file_sha256
from storage import repo
from storage.models import utcnow

log = logging.getLogger(__name__)


Enqueue = Callable[[int], None]
"""Sends the message that starts a recorded job (``messages.send_ingest`` in production)."""


class Outcome(str, enum.Enum):
    """What a bulk run did with one file."""

    SUBMITTED = "submitted"
    SKIPPED = "skipped"  # already submitted, or still being copied: nothing to do tonight
    UNREADABLE = "unreadable"  # a bad book: reported, not recorded, tried again next run


@dataclass(frozen=True)
class BulkOptions:
    """What a bulk run submits and where the audiobooks go.

    Attributes:
        out_dir: absolute folder that receives one sub-folder per book; workers must see the
            same path (a shared mount in a cluster).
        job: per-book options (formats, voice, priority); its ``out_dir`` is set per book.
        recursive: also look into sub-folders of the inbox.
        min_age_seconds: files changed more recently than this are left for the next run,
            because a file still being copied into the inbox would be submitted truncated.
    """

    out_dir: Path
    job: JobOptions = field(default_factory=JobOptions)
    recursive: bool = False
    min_age_seconds: float = BULK_MIN_AGE_SECONDS


@dataclass(frozen=True)
class BookOutcome:
    """One line of a bulk run's output."""

    path: Path
    outcome: Outcome
    reason: str = ""
    job_id: int | None = None
    sha256: str | None = None
    book_dir: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.path), "outcome": self.outcome.value, "reason": self.reason,
                "job": self.job_id, "sha256": self.sha256,
                "book_dir": str(self.book_dir) if self.book_dir else None}


# ---------------------------------------------------------------- finding books


def find_books(inbox: Path, recursive: bool = False) -> list[Path]:
    """Every file in ``inbox`` with a supported book extension, oldest first.

    Oldest first: books are recorded in the order they arrived (the queue speaks one run's books
    largest first: ``QueueKey.LARGER_BOOK``), and of two copies of one book the original (usually
    the older file) is the one submitted and named in the output.
    Hidden files are left out: editors and copy tools (rsync, browsers) write hidden temporaries.

    Raises:
        TtsJobsError: the inbox is not a readable folder.
    """
    from pipeline.ingest import SUPPORTED_EXTENSIONS, book_extension

    if not inbox.is_dir():
        raise TtsJobsError(f"{inbox}: not a folder (pass the folder that holds the books)")
    candidates = inbox.rglob("*") if recursive else inbox.iterdir()
    books = [p for p in candidates
             if p.is_file() and book_extension(p) in SUPPORTED_EXTENSIONS
             and not any(part.startswith(".") for part in p.relative_to(inbox).parts)]
    return sorted(books, key=_arrival)


def _arrival(path: Path) -> tuple[float, str]:
    try:
        return path.stat().st_mtime, str(path)
    except OSError:  # vanished since the listing: submit_one reports it
        return 0.0, str(path)


# ---------------------------------------------------------------- submitting


def submit_inbox(rt: Runtime, inbox: Path, options: BulkOptions,
                 enqueue: Enqueue) -> list[BookOutcome]:
    """Submit every book of ``inbox`` not submitted before; one outcome per book file.

    A bad book is an outcome, not an exception: the others are still submitted.

    Raises:
        TtsJobsError: the inbox, a format or the voice is wrong (nothing was submitted).
    """
    check_options(rt, options.job)
    outcomes, submitted_at = [], utcnow()  # one submission: its books are spoken largest first
    for path in find_books(inbox, options.recursive):
        outcome = submit_one(rt, path, options, enqueue, submitted_at)
        log.debug("bulk: %s %s%s", outcome.outcome.value, path,
                  f" (job {outcome.job_id})" if outcome.job_id else "")
        outcomes.append(outcome)
    return outcomes


def submit_one(rt: Runtime, path: Path, options: BulkOptions, enqueue: Enqueue,
               submitted_at: datetime | None = None) -> BookOutcome:
    """Submit one book unless its content was submitted before (see the module docstring);
    ``submitted_at``: the run's submission, which its books share (``add_job``)."""
    try:
        if time.time() - path.stat().st_mtime < options.min_age_seconds:
            return BookOutcome(path, Outcome.SKIPPED, f"changed less than {options.min_age_seconds:g} s "
                               "ago (still being copied?); the next run takes it")
        sha256 = file_sha256(path)
    except OSError as exc:  # removed since the listing, or no permission
        return BookOutcome(path, Outcome.UNREADABLE, f"cannot read it ({exc.strerror or exc})")
    known = _already_submitted(rt, sha256)
    if known is not None:  # the cheap path: no need to parse a book we have seen
        return replace(known, path=path)
    try:
        book = validate_book(path, options.job.reading())
    except BookError as exc:
        return BookOutcome(path, Outcome.UNREADABLE, _book_problem(exc), sha256=sha256)
    try:
        job_id, book_dir = _record(rt, path, book, sha256, options, submitted_at)
    except IntegrityError:  # another run inserted the same hash after our check: it wins
        known = _already_submitted(rt, sha256)
        return replace(known, path=path) if known else BookOutcome(
            path, Outcome.SKIPPED, "submitted by another run at the same time", sha256=sha256)
    _enqueue_or_withdraw(rt, job_id, sha256, enqueue)
    return BookOutcome(path, Outcome.SUBMITTED, job_id=job_id, sha256=sha256, book_dir=book_dir)


def _book_problem(exc: BookError) -> str:
    return exc.problem + (f" ({exc.fix})" if exc.fix else "")


def _already_submitted(rt: Runtime, sha256: str) -> BookOutcome | None:
    with rt.session() as session:
        entry = repo.bulk_entry(session, sha256)
        if entry is None:
            return None
        job = repo.get_job(session, entry.job_id) if entry.job_id is not None else None
        as_job = f"as job {job.id} ({job.state})" if job is not None else "(its job was deleted since)"
        first_seen = Path(entry.path)
        return BookOutcome(first_seen, Outcome.SKIPPED,
                           f"already submitted {as_job}, first seen as {first_seen}",
                           job_id=entry.job_id, sha256=sha256,
                           book_dir=book_dir_of(job) if job is not None else None)


def _record(rt: Runtime, path: Path, book: Any, sha256: str,
            options: BulkOptions, submitted_at: datetime | None = None) -> tuple[int, Path]:
    """Insert the bulk entry, then the job (which claims the book's folder), in one transaction.
    Returns (job id, book folder).

    Raises:
        IntegrityError: another run recorded this content first.
    """
    with rt.session() as session:
        entry = repo.add_bulk_entry(session, sha256, str(path.resolve()))  # waits for a rival run
        job = add_job(rt, session, path, book, replace(options.job, out_dir=options.out_dir), sha256,
                      submitted_at=submitted_at)
        book_dir = Path(job.options["out_dir"])
        try:
            entry.job_id = job.id
            session.commit()
        except BaseException:
            session.rollback()
            release_book_folder(book_dir)
            raise
        log.info("job=%s: submitted %s by bulk run (sha256 %s)", job.id, path, sha256[:12])
        return job.id, book_dir


def _enqueue_or_withdraw(rt: Runtime, job_id: int, sha256: str, enqueue: Enqueue) -> None:
    """Send the job's first message. If the broker does not take it, withdraw the submission.

    Without this, the bulk entry would make every later run skip a job that was never queued,
    and the claimed folder would push the book's next submission to a suffixed name.
    """
    def withdraw(job_id: int) -> None:
        with rt.session() as session:
            repo.delete_bulk_entry(session, sha256)
            session.commit()
        withdraw_job(rt, job_id)

    queue_or_withdraw(job_id, enqueue, withdraw)

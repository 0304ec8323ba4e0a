"""Nightly bulk runs: submit every new book in an inbox folder, once per content.

A book is known by the SHA-256 of its bytes, so a renamed or copied file is recognised. Each
submitted book gets one row in ``bulk_entries`` whose ``sha256`` is UNIQUE. The row is inserted
*first*, in the same transaction as the job. Two runs that overlap (cron fired twice, a slow night)
therefore cannot both submit a book: the second insert waits for the first transaction and then
fails with an IntegrityError. That book is then reported as skipped.

Layout under the output folder, one folder per book (jobs/book_folders.py: the layout audiobook
players expect)::

    OUT/Bram Stoker/Dracula/Dracula.m4b              (named by the audio stage from the title)
    OUT/Bram Stoker/Dracula/Dracula.report.json      (written here once the job is final)

    submit_inbox ─> (workers) ─> wait_for_jobs ─> write_report
                                 write_pending_reports (next run: reports for books finished since)
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from jobs.book_folders import release_book_folder
from jobs.choices.options import JobOptions
from jobs.cluster.broker import queue_or_withdraw
from jobs.runtime import Runtime
from jobs.status import JobStatus, job_statuses
from jobs.submit import add_job, check_options, validate_book, withdraw_job
from pipeline.errors import BookError, TtsJobsError
from pipeline.files import file_sha256
from storage import repo
from storage.artifacts import atomic_write_bytes
from storage.models import BulkEntry, Job, JobState

log = logging.getLogger(__name__)

REPORT_SUFFIX = ".report.json"
DEFAULT_MIN_AGE_SECONDS = 60.0
FINAL_STATES = tuple(s.value for s in JobState if s.is_final)

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
    job: JobOptions = JobOptions()
    recursive: bool = False
    min_age_seconds: float = DEFAULT_MIN_AGE_SECONDS


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

    Oldest first: books are queued in the order they arrived, and of two copies of one book the
    original (usually the older file) is the one submitted and named in the output.
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
    outcomes = []
    for path in find_books(inbox, options.recursive):
        outcome = submit_one(rt, path, options, enqueue)
        log.debug("bulk: %s %s%s", outcome.outcome.value, path,
                  f" (job {outcome.job_id})" if outcome.job_id else "")
        outcomes.append(outcome)
    return outcomes


def submit_one(rt: Runtime, path: Path, options: BulkOptions, enqueue: Enqueue) -> BookOutcome:
    """Submit one book unless its content was submitted before (see the module docstring)."""
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
        job_id, book_dir = _record(rt, path, book, sha256, options)
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
        entry = session.scalar(select(BulkEntry).where(BulkEntry.sha256 == sha256))
        if entry is None:
            return None
        job = repo.get_job(session, entry.job_id) if entry.job_id is not None else None
        as_job = f"as job {job.id} ({job.state})" if job is not None else "(its job was deleted since)"
        first_seen = Path(entry.path)
        return BookOutcome(first_seen, Outcome.SKIPPED,
                           f"already submitted {as_job}, first seen as {first_seen}",
                           job_id=entry.job_id, sha256=sha256,
                           book_dir=_book_dir_of(job) if job is not None else None)


def _record(rt: Runtime, path: Path, book: Any, sha256: str,
            options: BulkOptions) -> tuple[int, Path]:
    """Insert the bulk entry, then the job (which claims the book's folder), in one transaction.
    Returns (job id, book folder).

    Raises:
        IntegrityError: another run recorded this content first.
    """
    with rt.session() as session:
        entry = BulkEntry(sha256=sha256, path=str(path.resolve()))
        session.add(entry)
        session.flush()  # the UNIQUE check happens here; on PostgreSQL it waits for a rival run
        job = add_job(rt, session, path, book, replace(options.job, out_dir=options.out_dir), sha256)
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
            session.execute(delete(BulkEntry).where(BulkEntry.sha256 == sha256))
            session.commit()
        withdraw_job(rt, job_id)

    queue_or_withdraw(job_id, enqueue, withdraw)


# ---------------------------------------------------------------- waiting and reports


@dataclass(frozen=True)
class Progress:
    """A snapshot of the jobs a bulk run waits for."""

    books: int
    finished: int
    failed: int  # failed or cancelled
    sentences_done: int
    sentences_total: int

    def line(self) -> str:
        return (f"{self.finished}/{self.books} books finished ({self.failed} failed), "
                f"{self.sentences_done}/{self.sentences_total} sentences spoken")


def wait_for_jobs(rt: Runtime, job_ids: Sequence[int],
                  on_progress: Callable[[Progress], None] | None = None,
                  on_final: Callable[[JobStatus], object] | None = None,
                  poll_seconds: float = 10.0) -> list[JobStatus]:
    """Poll the job table until every job is final; returns their statuses in ``job_ids`` order.

    ``on_final`` is called once per job when it reaches a final state (done, failed, cancelled);
    ``on_progress`` whenever the numbers change.
    """
    final: dict[int, JobStatus] = {}
    last: Progress | None = None
    while True:
        current = {job_id: final.get(job_id) or job_statuses(rt, job_id)[0] for job_id in job_ids}
        for job_id, status in current.items():
            if job_id not in final and status.state in FINAL_STATES:
                final[job_id] = status
                if on_final:
                    on_final(status)
        progress = _progress(current.values())
        if progress != last and on_progress:
            on_progress(progress)
        last = progress
        if len(final) == len(job_ids):
            return [final[j] for j in job_ids]
        time.sleep(poll_seconds)


def _progress(statuses: Iterable[JobStatus]) -> Progress:
    statuses = list(statuses)
    unsuccessful = (JobState.FAILED.value, JobState.CANCELLED.value)
    return Progress(books=len(statuses),
                    finished=sum(s.state in FINAL_STATES for s in statuses),
                    failed=sum(s.state in unsuccessful for s in statuses),
                    sentences_done=sum(s.sentences_done for s in statuses),
                    sentences_total=sum(s.sentences_total for s in statuses))


def report_path(book_dir: Path) -> Path:
    """``OUT/Dracula/Dracula.report.json``."""
    return book_dir / f"{book_dir.name}{REPORT_SUFFIX}"


def book_report(status: JobStatus) -> dict[str, Any]:
    """What a user wants to know about one finished (or failed) book, from `jobs.status.job_statuses`."""
    report = status.report or {}
    if report.get("chapters"):  # assembled: where each chapter starts in the audiobook
        chapters = [{"title": c["title"], "start_seconds": c["start_seconds"], "seconds": c["seconds"]}
                    for c in report["chapters"]]
    else:  # failed or cancelled before assembly: how far each chapter got
        chapters = [{"title": c["title"], "sentences": c["sentences"], "sentences_done": c["sentences_done"]}
                    for c in status.chapters or []]
    return {"job": status.id, "title": status.title, "source": status.source, "state": status.state,
            "error": status.error, "voice": status.voice, "outputs": status.outputs,
            "duration_seconds": report.get("total_seconds", status.audio_seconds),
            "chapters": chapters,
            "sentences": {"total": status.sentences_total, "done": status.sentences_done,
                          "failed": status.sentences_failed,
                          "cut_at_length_limit": status.sentences_hit_limit},
            "warnings": status.warnings}


def write_report(rt: Runtime, job_id: int) -> Path | None:
    """Write ``<book>.report.json`` next to a final bulk job's audiobook; None for non-bulk jobs."""
    status = job_statuses(rt, job_id)[0]
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        book_dir = _book_dir_of(job) if job is not None else None
    if book_dir is None or status.state not in FINAL_STATES:
        return None
    target = report_path(book_dir)
    payload = json.dumps(book_report(status), ensure_ascii=False, indent=2) + "\n"
    atomic_write_bytes(target, payload.encode("utf-8"))
    log.info("job=%s: report %s", job_id, target)
    return target


def write_pending_reports(rt: Runtime, out_dir: Path) -> list[Path]:
    """Reports for bulk jobs under ``out_dir`` that became final since the last run (or changed
    state since, e.g. a failed job that was retried), so a run without ``--wait`` misses none."""
    written = []
    for job_id, book_dir, state in _final_bulk_jobs(rt):
        if not book_dir.is_relative_to(out_dir) or _reported_state(report_path(book_dir)) == state:
            continue
        path = write_report(rt, job_id)
        if path is not None:
            written.append(path)
    return written


def _final_bulk_jobs(rt: Runtime) -> list[tuple[int, Path, str]]:
    with rt.session() as session:
        rows = session.execute(select(Job).join(BulkEntry, BulkEntry.job_id == Job.id)
                               .where(Job.state.in_(FINAL_STATES)).order_by(Job.id)).scalars()
        return [(job.id, book_dir, job.state) for job in rows if (book_dir := _book_dir_of(job)) is not None]


def _reported_state(path: Path) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("state")
    except (OSError, ValueError, AttributeError):
        return None  # missing or damaged: write it again


def _book_dir_of(job: Job) -> Path | None:
    out_dir = (job.options or {}).get("out_dir")
    return Path(out_dir) if out_dir else None

"""A bulk run's waiting and reports: poll its jobs until each is final, and write
``<book>.report.json`` beside each finished (or failed) audiobook (jobs/bulk.py submits them).

    OUT/Bram Stoker/Dracula/Dracula.report.json      (written here once the job is final)

A run without ``--wait`` misses none: the next run writes the reports of books that became final
since (``write_pending_reports``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.runtime import Runtime
from jobs.status import JobStatus, job_statuses
from storage import repo
from storage.artifacts import atomic_write_bytes
from storage.models import Job, JobState

log = logging.getLogger(__name__)

REPORT_SUFFIX = ".report.json"
FINAL_STATES = tuple(s.value for s in JobState if s.is_final)


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
        book_dir = book_dir_of(job) if job is not None else None
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
        jobs = repo.bulk_jobs_in(session, FINAL_STATES)
        return [(job.id, book_dir, job.state) for job in jobs if (book_dir := book_dir_of(job)) is not None]


def _reported_state(path: Path) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("state")
    except (OSError, ValueError, AttributeError):
        return None  # missing or damaged: write it again


def book_dir_of(job: Job) -> Path | None:
    out_dir = (job.options or {}).get("out_dir")
    return Path(out_dir) if out_dir else None

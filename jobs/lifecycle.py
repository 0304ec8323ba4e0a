"""A job's ends and new starts: fail, cancel, retry.

A job ends ``done`` (assembly), ``failed`` or ``cancelled``; only the last two can be retried,
and a retry re-queues only what is missing: sentences that have their audio keep it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from jobs.runtime import Runtime
from pipeline.errors import TtsJobsError
from storage import repo
from storage.models import JobState

log = logging.getLogger(__name__)


def fail_job_in(session: Session, job_id: int, error: str) -> None:
    """Fail an active job inside the caller's transaction (a job already ended is left alone)."""
    if repo.move_job(session, job_id, JobState.FAILED, only_from=JobState.active(), error=error):
        log.error("job=%s: failed: %s", job_id, error)


def fail_job(rt: Runtime, job_id: int, error: str) -> None:
    """End a job that hit an error nobody will retry, so it never looks as if it were still running."""
    with rt.session() as session:
        fail_job_in(session, job_id, error)
        session.commit()


def cancel_job(rt: Runtime, job_id: int) -> bool:
    """Cancel an active job; False when it is not active. Its sentence audio is kept for a retry."""
    with rt.session() as session:
        moved = repo.move_job(session, job_id, JobState.CANCELLED, only_from=JobState.active(),
                              error="cancelled by the user")
        session.commit()
        return moved


@dataclass(frozen=True)
class RetryPlan:
    """What a retried job needs next: ``ingest``, ``plan`` or ``assemble``."""

    job_id: int
    next_step: str
    sentences_reset: int = 0


def retry_job(rt: Runtime, job_id: int) -> RetryPlan:
    """Re-queue only what is missing or failed; sentences with audio are kept."""
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise TtsJobsError(f"no job {job_id}: see `tts-jobs status`")
        if job.job_state not in (JobState.FAILED, JobState.CANCELLED):
            raise TtsJobsError(f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried")
        job.error = None
        job.finished_at = None
        if not repo.has_chapters(session, job_id):
            job.state = JobState.QUEUED.value
            step, reset = "ingest", 0
        else:
            reset = repo.reset_failed_sentences(session, job_id)
            progress = repo.job_progress(session, [job_id])[job_id]
            complete = progress.done == progress.total
            job.state = (JobState.ASSEMBLING if complete else JobState.SYNTHESIZING).value
            step = "assemble" if complete else "plan"
        session.commit()
        return RetryPlan(job_id=job_id, next_step=step, sentences_reset=reset)

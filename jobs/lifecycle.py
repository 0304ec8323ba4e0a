"""A job's ends and new starts: fail, interrupt, cancel, retry (or resume).

A job ends ``done`` (assembly), ``failed``, ``cancelled`` or ``interrupted`` (its `tts-jobs run`
stopped). All but ``done`` can be started again, and a new start re-queues only what is missing:
sentences that have their audio keep it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from jobs.leases import holder_gone
from jobs.runtime import Runtime
from pipeline.errors import NoSuchJob, TtsJobsError
from storage import repo
from storage.models import BatchState, Job, JobState

log = logging.getLogger(__name__)

RESTARTABLE = (JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)  # by `retry`
RETRYABLE_BY_RUN = (JobState.INTERRUPTED, JobState.FAILED)  # by `run` of the same book


def require_job(session: Session, job_id: int, *, for_update: bool = False) -> Job:
    """The job, or NoSuchJob (the same message from every command)."""
    job = repo.get_job(session, job_id, for_update=for_update)
    if job is None:
        raise NoSuchJob(job_id)
    return job


def fail_job_in(session: Session, job_id: int, error: str) -> None:
    """Fail an active job inside the caller's transaction (a job already ended is left alone)."""
    if repo.move_job(session, job_id, JobState.FAILED, only_from=JobState.active(), error=error):
        log.error("job=%s: failed: %s", job_id, error)


def fail_job(rt: Runtime, job_id: int, error: str) -> None:
    """End a job that hit an error nobody will retry, so it never looks as if it were still running."""
    with rt.session() as session:
        fail_job_in(session, job_id, error)
        session.commit()


def interrupt_job_in(session: Session, job_id: int, reason: str) -> bool:
    """An active job whose process stopped: ``interrupted``, resumable, no longer running."""
    moved = repo.move_job(session, job_id, JobState.INTERRUPTED, only_from=JobState.active(), error=reason)
    if moved:
        repo.set_runner(session, job_id, None)
        log.warning("job=%s: interrupted (%s)", job_id, reason)
    return moved


def cancel_job(rt: Runtime, job_id: int) -> None:
    """Cancel an active or interrupted job. Its sentence audio is kept for a retry.

    Raises NoSuchJob, or TtsJobsError when the job has ended already."""
    with rt.session() as session:
        job = require_job(session, job_id)
        if not repo.move_job(session, job_id, JobState.CANCELLED,
                             only_from=(*JobState.active(), JobState.INTERRUPTED), error="cancelled by the user"):
            raise TtsJobsError(f"job {job_id} is {job.state} already; only a running or interrupted job "
                               "can be cancelled")
        session.commit()


@dataclass(frozen=True)
class RetryPlan:
    """What a retried job needs next: ``ingest``, ``plan`` or ``assemble``."""

    job_id: int
    next_step: str
    sentences_reset: int = 0


def retry_job(rt: Runtime, job_id: int, only_from: tuple[JobState, ...] = RESTARTABLE,
              runner: str | None = None) -> RetryPlan:
    """Start a job again where it stopped: only what is missing or failed is re-queued.
    ``runner``: the process that runs an embedded job from now on (recorded in the same step)."""
    with rt.session() as session:
        job = require_job(session, job_id, for_update=True)
        if not (only_from == RESTARTABLE and _stuck(rt, session, job)):
            _check_restartable(job, only_from)
        plan = reopen_in(session, job)
        if runner is not None:
            repo.set_runner(session, job_id, runner)
        session.commit()
        return plan


def resumes_in_process(rt: Runtime, job_id: int) -> bool:
    """Whether job ``job_id`` is one of `tts-jobs run` (resumed by the process that asks) rather
    than of the workers. Raises NoSuchJob, or TtsJobsError when the job is not stopped — before
    anything is changed or any model loads."""
    with rt.read_session() as session:
        job = require_job(session, job_id)
        if not _stuck(rt, session, job):
            _check_restartable(job, RESTARTABLE)
        return job.embedded


def _stuck(rt: Runtime, session: Session, job: Job) -> bool:
    """A cluster job in a running state that nothing moves: no live process holds its stage, and
    none of its batches is being spoken. (The sweeper resends such work by itself; `retry` does
    it now.)"""
    if job.embedded or job.job_state not in JobState.active():
        return False
    if not holder_gone(job.runner, job.heartbeat_at, rt.settings.lease_seconds):
        return False
    running = repo.job_batches(session, job.id, [BatchState.RUNNING])
    return not running


def _check_restartable(job: Job, only_from: tuple[JobState, ...]) -> None:
    if job.job_state not in only_from:
        allowed = ", ".join(s.value for s in only_from)
        raise TtsJobsError(f"job {job.id} is {job.state}, and a live worker is on it; only {allowed} "
                           "jobs, or jobs that nothing moves, can be started again")


def reopen_in(session: Session, job: Job) -> RetryPlan:
    """Move a stopped job back to the stage it stopped in; the caller commits."""
    job.error = None
    job.finished_at = None
    if not repo.has_chapters(session, job.id):
        job.state = JobState.QUEUED.value
        return RetryPlan(job_id=job.id, next_step="ingest")
    reset = repo.reset_failed_sentences(session, job.id)
    progress = repo.job_progress(session, [job.id])[job.id]
    complete = progress.done == progress.total
    job.state = (JobState.ASSEMBLING if complete else JobState.SYNTHESIZING).value
    return RetryPlan(job_id=job.id, next_step="assemble" if complete else "plan", sentences_reset=reset)

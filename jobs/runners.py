"""The process behind an embedded job: recorded on the job, heart-beating, recognised when gone.

A `tts-jobs run` process records itself on its job (``runner`` = host:pid) and renews the job's
heartbeat every ``HEARTBEAT_SECONDS`` while it works (leases.JobHeartbeat). Whoever looks at the
job table next (`status`, another `run`) moves an embedded job whose process is gone — a dead pid
on this host, or a heartbeat older than ``RUNNER_LEASE_SECONDS`` — to ``interrupted``: a killed
run never looks as if it still ran.
"""

from __future__ import annotations

from jobs.leases import JobHeartbeat, holder_gone
from jobs.lifecycle import interrupt_job_in
from jobs.runtime import Runtime
from storage import repo
from storage.models import BatchState, Job, JobState

HEARTBEAT_SECONDS = 10.0
RUNNER_LEASE_SECONDS = 60.0  # six missed heartbeats: the process is gone (or its host is)


def runner_alive(job: Job) -> bool:
    """Whether the process recorded on an embedded job still runs it."""
    return not holder_gone(job.runner, job.heartbeat_at, RUNNER_LEASE_SECONDS)


def recognise_interrupted(rt: Runtime) -> list[int]:
    """Move every active embedded job whose process is gone to ``interrupted``; returns their ids."""
    with rt.read_session() as session:
        gone = [job.id for job in repo.embedded_jobs_in(session, JobState.active()) if not runner_alive(job)]
    if not gone:
        return []
    with rt.session() as session:
        moved = [job_id for job_id in gone if interrupt_job_in(
            session, job_id, "its `tts-jobs run` process ended without finishing it")]
        for job_id in moved:
            repo.give_back_batches(session, repo.job_batches(session, job_id, [BatchState.RUNNING]))
        session.commit()
    return moved


def run_heartbeat(rt: Runtime, job_id: int, runner: str) -> JobHeartbeat:
    """This process runs embedded job ``job_id``: recorded now, heart-beating while in the block."""
    with rt.session() as session:
        repo.set_runner(session, job_id, runner)
        session.commit()
    return JobHeartbeat(rt, job_id, runner, interval=HEARTBEAT_SECONDS)

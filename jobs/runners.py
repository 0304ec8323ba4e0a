"""The process behind an embedded job: named, heart-beating, and recognised when it is gone.

A `tts-jobs run` process records itself on its job (``runner`` = host:pid) and renews the job's
heartbeat while it works. Whoever looks at the job table next (`status`, another `run`) moves an
embedded job whose process is gone — a dead pid on this host, or a heartbeat older than
``RUNNER_LEASE_SECONDS`` — to ``interrupted``: a killed run never looks as if it still ran.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from jobs.leases import process_alive
from jobs.lifecycle import interrupt_job_in
from jobs.runtime import Runtime
from storage import repo
from storage.models import BatchState, Job, JobState, utcnow

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
RUNNER_LEASE_SECONDS = 60.0  # six missed heartbeats: the process is gone (or its host is)


def this_process() -> str:
    """host:pid, as batch leases name a process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def runner_alive(job: Job) -> bool:
    """Whether the process recorded on an embedded job still runs it."""
    if not job.runner:
        return False
    beat = job.heartbeat_at
    if beat is not None and beat.tzinfo is None:  # SQLite returns naive UTC datetimes
        beat = beat.replace(tzinfo=utcnow().tzinfo)
    if beat is None or utcnow() - beat > timedelta(seconds=RUNNER_LEASE_SECONDS):
        return False
    host, _, pid = job.runner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return process_alive(int(pid))
    return True


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


class Heartbeat:
    """Renews an embedded job's heartbeat from a background thread while this process runs it."""

    def __init__(self, rt: Runtime, job_id: int, runner: str) -> None:
        self._rt, self._job_id, self._runner = rt, job_id, runner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        with self._rt.session() as session:
            repo.set_runner(session, self._job_id, self._runner)
            session.commit()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                with self._rt.session() as session:
                    repo.beat(session, self._job_id, self._runner)
                    session.commit()
            except Exception:  # a database blip: the next beat retries, well inside the lease
                log.warning("job=%s: heartbeat failed", self._job_id, exc_info=True)

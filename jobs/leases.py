"""Leases: which process holds a piece of work, renewed while it works, taken over when it is gone.

Every stage has one. A synthesis batch is leased on its row (``leased_by`` = host:pid,
``heartbeat_at``, ``LeaseKeeper``); a job's ingest or assembly — and an embedded job's whole run —
on the job row (``runner``, ``heartbeat_at``, ``JobHeartbeat``). A second delivery of the same
work sees a live holder and leaves it alone. A holder is gone when it is a process on this host
that no longer exists, or when its heartbeat is older than the lease: then the work is taken over
(a redelivered message, ``claim_job_stage``) or sent out again by the sweeper (jobs/cluster/reconcile.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from jobs.runtime import Runtime
from pipeline.temp_files import process_alive
from storage import repo
from storage.models import Batch, BatchState, utcnow

log = logging.getLogger(__name__)


def this_process() -> str:
    """host:pid, as leases name a process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def this_parent() -> str:
    """host:pid of this process's parent (a Celery pool child's: the worker's main process)."""
    return f"{socket.gethostname()}:{os.getppid()}"


def death_was_its_doing(parent: str | None) -> bool:
    """A holder died: was it what it ran? Its parent still alive on this host means the pool child
    alone died — the OOM killer, a crash: what it ran is suspect. The parent gone too means the
    whole worker went down (a crashed host, an operator's kill, a restart): not the work's doing.
    An unknown parent (another host) counts, as it always did."""
    if not parent:
        return True
    host, _, pid = parent.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return process_alive(int(pid))


def holder_gone(holder: str | None, heartbeat: datetime | None, lease_seconds: float) -> bool:
    """Whether the process that holds some work no longer does: no holder, a dead pid on this
    host, or no heartbeat for ``lease_seconds`` (a holder on another host is judged by that alone)."""
    if not holder:
        return True
    if heartbeat is not None and heartbeat.tzinfo is None:  # SQLite returns naive UTC datetimes
        heartbeat = heartbeat.replace(tzinfo=utcnow().tzinfo)
    if heartbeat is None or utcnow() - heartbeat > timedelta(seconds=lease_seconds):
        return True
    host, _, pid = holder.rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and not process_alive(int(pid))


# ---------------------------------------------------------------- batches


class Renewing:
    """A background thread that renews something every ``interval`` seconds while the block runs
    (a database blip is logged; the next beat retries, well inside the lease)."""

    def __init__(self, name: str, interval: float) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Renewing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def renew(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.renew()
            except Exception:  # the work must not die of a blip
                log.warning("%s: renewal failed", self._thread.name, exc_info=True)


class LeaseKeeper(Renewing):
    """Renews the leases of ``batch_ids`` while the GPU works (a stream adds and removes ids as
    it goes: the set is read under ``lock``)."""

    def __init__(self, rt: Runtime, batch_ids: set[int], worker: str) -> None:
        super().__init__(f"lease-{min(batch_ids)}", max(1.0, rt.settings.lease_seconds / 5))
        self._rt, self.batch_ids, self._worker = rt, batch_ids, worker
        self.lock = threading.Lock()

    def add(self, batch_id: int) -> None:
        with self.lock:
            self.batch_ids.add(batch_id)

    def discard(self, batch_id: int) -> None:
        with self.lock:
            self.batch_ids.discard(batch_id)

    def renew(self) -> None:
        with self.lock:
            batch_ids = sorted(self.batch_ids)
        with self._rt.session() as session:
            for batch_id in batch_ids:
                repo.renew_lease(session, batch_id, self._worker)
            session.commit()


def take_over_from_dead_local_worker(session: Session, batch_id: int, worker: str) -> Batch | None:
    """A redelivered batch whose lease holder was a process on this host that no longer exists.

    When a worker's child is killed mid-batch, Celery redelivers the message at once; waiting for
    the lease to expire would idle the GPU for minutes. A holder on another host is never presumed dead.
    """
    batch = session.get(Batch, batch_id)
    if batch is None or batch.state != BatchState.RUNNING.value or not batch.leased_by:
        return None
    host, _, pid = batch.leased_by.rpartition(":")
    if host != worker.rpartition(":")[0] or not pid.isdigit() or process_alive(int(pid)):
        return None
    log.warning("batch=%s: its worker %s died; taking it over", batch_id, batch.leased_by)
    parent = this_parent() if worker == this_process() else None
    return repo.take_over_batch(session, batch_id, worker, batch.leased_by, parent=parent,
                                its_doing=death_was_its_doing(batch.holder_parent))


def return_batches_of_gone_holders(rt: Runtime) -> list[int]:
    """Running batches whose holder is gone (a dead pid on this host at once; elsewhere once the
    lease ran out) back to the queue, the death counted against each. Returns them: the caller
    sends each one's message, once."""
    with rt.read_session() as session:
        held = repo.running_holders(session)
    gone = [(holder, parent) for holder, (parent, beat) in held.items()
            if holder_gone(holder, beat, rt.settings.lease_seconds)]
    returned: list[int] = []
    for holder, parent in gone:
        with rt.session() as session:
            batch_ids = repo.return_dead_holders_batches(session, holder, its_doing=death_was_its_doing(parent))
            session.commit()
        if batch_ids:
            log.warning("batches %s: their worker %s went silent; sending them out again", batch_ids, holder)
        returned += batch_ids
    return returned


# ---------------------------------------------------------------- job stages


def claim_job_stage(rt: Runtime, job_id: int, holder: str) -> str | None:
    """Take job ``job_id``'s current stage (its ingest or assembly) for ``holder``. Returns None
    when taken (or when there is no such job: the stage itself says so), else the live holder."""
    for _ in range(3):  # the holder may change between the read and the update (a sweeper freed it)
        with rt.session() as session:
            job = repo.get_job(session, job_id)
            if job is None or job.runner == holder:
                session.commit()
                return None
            previous = job.runner
            if previous and not holder_gone(previous, job.heartbeat_at, rt.settings.lease_seconds):
                session.commit()
                return previous
            taken = repo.take_job_stage(session, job_id, holder, previous)
            session.commit()
        if taken:
            if previous:
                log.warning("job=%s: its worker %s is gone; taking its stage over", job_id, previous)
            return None
    return "another worker"


def release_job_stage(rt: Runtime, job_id: int, holder: str) -> None:
    with rt.session() as session:
        repo.release_job_stage(session, job_id, holder)
        session.commit()


@contextmanager
def job_stage(rt: Runtime, job_id: int, holder: str) -> Iterator[str | None]:
    """Hold job ``job_id``'s stage while the block runs (heartbeat renewed, released after).
    Yields None when held, else the live holder that has it (then do nothing)."""
    other = claim_job_stage(rt, job_id, holder)
    if other is not None:
        yield other
        return
    try:
        with JobHeartbeat(rt, job_id, holder, interval=max(1.0, rt.settings.lease_seconds / 5)):
            yield None
    finally:
        release_job_stage(rt, job_id, holder)


class JobHeartbeat(Renewing):
    """Renews a job's heartbeat while ``holder`` works on it."""

    def __init__(self, rt: Runtime, job_id: int, holder: str, interval: float) -> None:
        super().__init__(f"heartbeat-{job_id}", interval)
        self._rt, self._job_id, self._holder = rt, job_id, holder

    def renew(self) -> None:
        with self._rt.session() as session:
            repo.beat(session, self._job_id, self._holder)
            session.commit()

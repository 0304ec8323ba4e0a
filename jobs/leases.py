"""Leases on running batches: who holds a batch, renewed while it works, taken over when its
holder died.

A worker that claims a batch records ``leased_by`` (host:pid) and renews ``heartbeat_at``
(``LeaseKeeper``). Every live worker sweeps batches whose lease ran out back to the queue
(``requeue_stale_batches``). A redelivered batch whose holder was a process on this host that no
longer exists is taken over at once (``take_over_from_dead_local_worker``) instead of after the
lease: waiting would idle the GPU for minutes.
"""

from __future__ import annotations

import logging
import os
import threading

from sqlalchemy.orm import Session

from jobs.runtime import Runtime
from storage import repo
from storage.models import Batch, BatchState

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the leases of ``batch_ids`` from a background thread while the GPU works (a stream
    adds and removes ids as it goes: the set is read under ``lock``)."""

    def __init__(self, rt: Runtime, batch_ids: set[int], worker: str) -> None:
        self._rt, self.batch_ids, self._worker = rt, batch_ids, worker
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{min(batch_ids)}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def add(self, batch_id: int) -> None:
        with self.lock:
            self.batch_ids.add(batch_id)

    def discard(self, batch_id: int) -> None:
        with self.lock:
            self.batch_ids.discard(batch_id)

    def _run(self) -> None:
        interval = max(1.0, self._rt.settings.lease_seconds / 5)
        while not self._stop.wait(interval):
            with self.lock:
                batch_ids = sorted(self.batch_ids)
            try:
                with self._rt.session() as session:
                    for batch_id in batch_ids:
                        repo.renew_lease(session, batch_id, self._worker)
                    session.commit()
            except Exception:  # a database blip must not kill the batch; the next beat retries
                log.warning("batches %s: lease renewal failed", batch_ids, exc_info=True)


def requeue_stale_batches(rt: Runtime) -> list[int]:
    """Batches whose worker went silent (host crash, OOM kill): sent out again by live workers."""
    with rt.session() as session:
        stale = repo.stale_batches(session, rt.settings.lease_seconds)
        session.commit()
    return stale


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
    return repo.take_over_batch(session, batch_id, worker, batch.leased_by)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

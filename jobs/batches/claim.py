"""Claim: take a queued batch's lease for this worker, with the sentences it has left to speak.

A batch held by a live lease elsewhere (a duplicate delivery) is left alone; a batch whose holder
died on this host is taken over; a batch that killed every worker that ran it alone fails for good
instead of killing the next one. A batch becomes a suspect, run alone from then on, as the
scheduling policy says (``SchedulingPolicy.is_suspect``): a death among a stream's batches is held
against none of them until one of them is in a second.
"""

from __future__ import annotations

import logging

from jobs.batches.record import fail_batch_for_good, finish_batch
from jobs.batches.work import ClaimedBatch, SentenceWork
from jobs.choices.delivery import Delivery
from jobs.leases import take_over_from_dead_local_worker, this_parent, this_process
from jobs.runtime import Runtime
from pipeline.scheduling import SchedulingPolicy
from storage import repo

log = logging.getLogger(__name__)


def claim_batch(rt: Runtime, batch_id: int, worker: str, take_over_dead: bool = False
                ) -> tuple[ClaimedBatch | None, list[int]]:
    """Lease batch ``batch_id`` for ``worker`` with its pending sentences. None when there is
    nothing to speak: held elsewhere, failed for good after too many attempts, or finished now
    because nothing in it was left (then with the jobs that this made ready to assemble)."""
    settings = rt.settings
    with rt.session() as session:
        parent = this_parent() if worker == this_process() else None
        batch = repo.claim_batch(session, batch_id, worker, settings.lease_seconds, parent=parent)
        if batch is None and take_over_dead:
            batch = take_over_from_dead_local_worker(session, batch_id, worker)
        if batch is None:
            session.commit()
            log.info("batch=%s: finished or leased elsewhere; nothing to do", batch_id)
            return None, []
        if batch.solo_deaths >= settings.max_attempts:  # it killed every worker that ran it alone
            fail_batch_for_good(session, batch_id, f"its worker process died {batch.solo_deaths} times "
                                "while speaking it alone (out of memory? try a smaller TTS_JOBS_MAX_BATCH)")
            session.commit()
            return None, []
        failures = batch.failures
        suspect = SchedulingPolicy().is_suspect(batch.holder_deaths, batch.solo_deaths)
        session.commit()
    with rt.read_session() as session:  # leased now: read without holding the write lock
        sentences = repo.batch_pending_sentences(session, batch_id)
        jobs = {s.job_id: repo.get_job(session, s.job_id) for s in sentences}
        deliveries = {job_id: Delivery.of_job(job) for job_id, job in jobs.items()}
        work = [SentenceWork.from_row(s, jobs[s.job_id], deliveries[s.job_id]) for s in sentences]
    if not work:
        return None, finish_batch(rt, batch_id)
    return ClaimedBatch(batch_id=batch_id, attempts=failures + 1, work=work, suspect=suspect), []

"""The messages that move work between stages: ids only, sent by task name, each recorded as sent
(``sent_at``) so that the reconciler can tell work whose message never went out.

A message that continues work already recorded keeps trying through a broker outage
(``CONTINUATION_RETRY``): losing it would leave a job half-way with nothing to wake it (the
reconciler would, later). `submit` uses Celery's short default and reports failure. ``argsrepr``
makes the messages readable on Flower's screens.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobs import faults
from jobs.cluster.celery_app import app
from jobs.lifecycle import RetryPlan
from jobs.runtime import Runtime
from storage import repo

log = logging.getLogger(__name__)

CONTINUATION_RETRY = {"max_retries": 120, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 5.0}
INGEST, PLAN, SYNTHESIZE, ASSEMBLE = ("tts_jobs.ingest_job", "tts_jobs.plan_pending",
                                      "tts_jobs.synthesize_batch", "tts_jobs.assemble_job")
ASSEMBLE_AHEAD = "tts_jobs.assemble_ahead"


def send_ingest(rt: Runtime, job_id: int, continuation: bool = False) -> None:
    _send(INGEST, (job_id,), f"job {job_id}", continuation)
    _mark_job(rt, job_id)


def send_plan(why: str) -> None:
    _send(PLAN, (), why, continuation=True)


def send_batches(rt: Runtime, batch_ids: Sequence[int]) -> None:
    for batch_id in batch_ids:
        _send(SYNTHESIZE, (batch_id,), f"batch {batch_id}", continuation=True)
    if batch_ids:
        with rt.session() as session:
            repo.mark_batches_sent(session, batch_ids)
            session.commit()


def send_assemblies(rt: Runtime, job_ids: Sequence[int]) -> None:
    if job_ids:
        faults.after_commit("record")
    for job_id in job_ids:
        _send(ASSEMBLE, (job_id,), f"job {job_id}", continuation=True)
        _mark_job(rt, job_id)


def send_assemble_ahead(rt: Runtime, batch_id: int) -> None:
    """Ask the CPU queue to assemble ahead what batch ``batch_id`` finished of its books' chapters.
    Best effort, never retried: a lost message leaves those chapters to the next one, or to the
    assembly; it never fails the recording that sent it."""
    try:
        with rt.read_session() as session:
            job_ids = repo.batch_job_ids(session, batch_id)
        for job_id in job_ids:
            app.send_task(ASSEMBLE_AHEAD, (job_id,), argsrepr=f"job {job_id}", retry=False)
    except Exception as exc:  # noqa: BLE001 - an optimisation's message, not the work's
        log.warning("batch=%s: no assemble-ahead message sent (%s: %s)", batch_id, type(exc).__name__, exc)


def send_next_step(rt: Runtime, retry: RetryPlan) -> None:
    """The message that continues a retried job."""
    faults.after_commit("retry")
    if retry.next_step == "ingest":
        send_ingest(rt, retry.job_id)
    elif retry.next_step == "plan":
        send_plan(f"retry of job {retry.job_id}")
    else:
        send_assemblies(rt, [retry.job_id])


def _send(task: str, args: tuple[int, ...], argsrepr: str, continuation: bool) -> None:
    options = {"retry_policy": CONTINUATION_RETRY} if continuation else {}
    app.send_task(task, args, argsrepr=argsrepr, **options)


def _mark_job(rt: Runtime, job_id: int) -> None:
    """Best effort: a mark lost to a database blip only makes the reconciler resend it later."""
    try:
        with rt.session() as session:
            repo.mark_job_sent(session, job_id)
            session.commit()
    except Exception:  # noqa: BLE001 - the message itself went out
        log.warning("job=%s: could not record its message as sent", job_id, exc_info=True)

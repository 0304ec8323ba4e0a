"""Thin Celery tasks: check the ids, call a use case of jobs/, send the next message.

Bad input (BookError) fails its job and is never retried; transient failures (database or broker
blips, device errors) retry with backoff, a bounded number of times. A task that ends its job as
failed ends in Celery's FAILURE state (``JobFailed``), so Flower lists it under Failed. A message
whose arguments are not ids is rejected at once, never retried. Ingest and assembly run under a
claim on the job (jobs/leases.py): a second delivery while the first runs does nothing. What a
worker process loads, and its sweep, are in jobs/cluster/worker_process.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from celery import shared_task
from celery.exceptions import Reject
from sqlalchemy import select
from sqlalchemy.exc import InterfaceError, OperationalError

from jobs import assemble, faults, ingest, plan
from jobs import assemble_ahead as ahead
from jobs.batches import speak
from jobs.batches import stream as batch_stream
from jobs.cluster import messages
from jobs.cluster.celery_app import app
from jobs.cluster.worker_process import engine, runtime, synthesis_worker_name, worker_name
from jobs.leases import job_stage
from jobs.lifecycle import fail_job
from jobs.runtime import Runtime
from jobs.status import job_statuses
from pipeline.errors import AssemblyError, TtsJobsError
from storage.models import JobState, Sentence, SentenceState

log = logging.getLogger(__name__)

# Connection-level faults worth retrying; everything about the book itself is final.
RETRYABLE = (ConnectionError, TimeoutError, OSError, OperationalError, InterfaceError)
TASK_OPTIONS = {"bind": True, "autoretry_for": RETRYABLE, "retry_backoff": True, "retry_backoff_max": 300,
                "max_retries": 8}


class JobFailed(TtsJobsError):
    """Raised by a task after its job was recorded as failed: the task ends in Celery's FAILURE
    state, so Flower's Failed tab lists the book. Not in RETRYABLE, so Celery never retries it;
    in each task's ``throws``, so the worker logs it in one line, without a traceback."""


def raise_if_failed(job_id: int) -> None:
    """JobFailed when job ``job_id`` is recorded as failed (a use case failed it and returned)."""
    [status] = job_statuses(runtime(), job_id)
    if status.state == JobState.FAILED.value:
        raise JobFailed(f"job {job_id} failed: {status.error}")


def as_id(value: object, what: str) -> int:
    """A message's id, or Reject (dropped, not retried): a message with other arguments was not
    sent by tts-jobs and can never succeed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        log.error("dropped a message whose %s is %r, not an id", what, value)
        raise Reject(f"{what} {value!r} is not an id", requeue=False)
    return value


@contextmanager
def _stage_of_this_worker(rt: Runtime, job_id: int, doing: str) -> Iterator[bool]:
    """Holds the job's stage for this process while the block runs; False (logged) when a live
    process holds it already: a second delivery then does nothing."""
    with job_stage(rt, job_id, worker_name()) as holder:
        if holder is not None:
            log.info("job=%s: %s is %s it; nothing to do", job_id, holder, doing)
        yield holder is None


@contextmanager
def _failing_job_on_final_error(task, job_id: int):  # type: ignore[no-untyped-def]
    """Fail the job when an error will not be retried (a bug, or the last retry), never leave it hanging."""
    try:
        yield
    except RETRYABLE as exc:
        if task.request.retries >= task.max_retries:
            fail_job(runtime(), job_id, f"gave up after {task.max_retries} retries: {exc}")
        raise
    except Exception as exc:
        if not isinstance(exc, AssemblyError):
            fail_job(runtime(), job_id, f"internal error ({type(exc).__name__}: {exc}); "
                     "please report it, then `tts-jobs retry`")
        raise


@shared_task(name=messages.INGEST, throws=(JobFailed,), **TASK_OPTIONS)
def ingest_job(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Read job ``job_id``'s book into chapters and sentences, plan it here, then send the plan
    message (it finds nothing left to plan, unless planning here failed)."""
    job_id, rt = as_id(job_id, "job"), runtime()
    with _stage_of_this_worker(rt, job_id, "reading") as ours:
        if not ours:
            return
        faults.pause("ingest")
        with _failing_job_on_final_error(self, job_id):
            ready = ingest.ingest_job(rt, job_id)
    if not ready:
        raise_if_failed(job_id)  # a bad book; a cancelled job just stops
        return
    faults.after_commit("ingest")
    plan_after_ingest(job_id)
    messages.send_plan(f"after job {job_id}")


def plan_after_ingest(job_id: int) -> None:
    """Plan every unplanned sentence and send the batches, as ``plan_pending`` does, but at once:
    its message queued behind other books' ingests (one task at a time per process) and waited
    for SQLite's write lock. Two planners never take the same sentence (repo.unplanned_sentences),
    so two ingests ending together are safe. A failure leaves the work to the plan message sent
    next: it retries a database blip with backoff, and reports anything else."""
    rt = runtime()
    faults.pause("plan")
    try:
        batch_ids = plan.plan_pending(rt)
    except Exception:  # noqa: BLE001 - the plan message does it again
        log.warning("job=%s: planning after the ingest failed; the plan message will do it", job_id,
                    exc_info=True)
        return
    faults.after_commit("plan")
    messages.send_batches(rt, batch_ids)


@shared_task(name=messages.PLAN, **TASK_OPTIONS)
def plan_pending(self) -> None:  # type: ignore[no-untyped-def]
    """Cut every unplanned sentence into batches and send one message per batch."""
    rt = runtime()
    batch_ids = plan.plan_pending(rt)
    faults.after_commit("plan")
    messages.send_batches(rt, batch_ids)


@shared_task(name=messages.SYNTHESIZE, throws=(JobFailed,), **TASK_OPTIONS)
def synthesize_batch(self, batch_id: int) -> None:  # type: ignore[no-untyped-def]
    """Speak batch ``batch_id`` (and, streaming, the queued batches after it); hand finished jobs
    to assembly. A sentence of these batches that failed its book ends the task as JobFailed
    (FAILURE), once recorded and never retried."""
    batch_id, rt = as_id(batch_id, "batch"), runtime()
    speaker = engine()
    speaker.clock.reset()  # one task's GPU timeline (the clock's events would pile up otherwise)
    recorded: list[int] = []

    def assemble_ahead_after(batch: int) -> None:  # its books' newly spoken chapters, on the CPU queue
        recorded.append(batch)
        messages.send_assemble_ahead(rt, batch)

    try:
        if rt.settings.stream_seconds > 0:
            ready: list[int] = []
            batch_stream.synthesize_stream(
                rt, speaker, batch_id, worker_name(), jobs_ready=lambda jobs: messages.send_assemblies(rt, jobs),
                batch_returned=lambda batch: messages.send_batches(rt, [batch]), learned_by=synthesis_worker_name(),
                batch_recorded=assemble_ahead_after)
        else:
            ready = speak.synthesize_batch(rt, speaker, batch_id, worker_name(),
                                           learned_by=synthesis_worker_name())
            assemble_ahead_after(batch_id)
        speak.log_device_time(f"batch={batch_id} (and the batches streamed after it)", speaker)
    except RETRYABLE:
        raise
    except Exception as exc:
        # The batch was given back (or failed for good after max_attempts); retry the message.
        if self.request.retries < rt.settings.max_attempts:
            raise self.retry(exc=exc, countdown=5 * (self.request.retries + 1))
        raise
    messages.send_assemblies(rt, ready)
    raise_if_sentences_failed(rt, recorded)


def raise_if_sentences_failed(rt: Runtime, batch_ids: list[int]) -> None:
    """JobFailed naming the first sentence of ``batch_ids`` that failed (its job failed with it)."""
    if not batch_ids:
        return
    with rt.session() as session:
        failed = session.execute(
            select(Sentence.job_id, Sentence.error).where(Sentence.batch_id.in_(batch_ids),
                                                           Sentence.state == SentenceState.FAILED.value)
            .order_by(Sentence.job_id, Sentence.id)).all()
    if failed:
        jobs = sorted({job for job, _ in failed})
        raise JobFailed(f"job {', '.join(map(str, jobs))} failed: {len(failed)} sentence(s) could not be "
                        f"spoken ({failed[0].error})")


@shared_task(name=messages.ASSEMBLE, throws=(JobFailed,), **TASK_OPTIONS)
def assemble_job(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Stitch job ``job_id``'s audio into its audiobook files (once: a second delivery while the
    first assembles finds its claim and does nothing)."""
    job_id, rt = as_id(job_id, "job"), runtime()
    with _stage_of_this_worker(rt, job_id, "assembling") as ours:
        if not ours:
            return
        faults.pause("assemble")
        try:
            with _failing_job_on_final_error(self, job_id):
                assemble.assemble_job(rt, job_id, prepared=lambda: ahead.take_prepared(rt, job_id))
        except AssemblyError as exc:  # recorded on the job; bad audio is not retried
            raise JobFailed(f"job {job_id} failed: {exc}") from exc


@shared_task(name=messages.ASSEMBLE_AHEAD, bind=True)
def assemble_ahead(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Assemble the chapters of job ``job_id`` spoken so far while the rest is spoken (best effort:
    never retried; what it does not do, the assembly does)."""
    job_id, rt = as_id(job_id, "job"), runtime()
    try:
        prepared = ahead.prepare_ahead(rt, job_id)
    except Exception as exc:  # noqa: BLE001 - the book's assembly does these chapters itself
        log.warning("job=%s: nothing assembled ahead (%s: %s)", job_id, type(exc).__name__, exc)
        return
    if prepared:
        log.info("job=%s: %d chapter(s) assembled ahead", job_id, prepared)


__all__ = ["app", "ingest_job", "plan_pending", "synthesize_batch", "assemble_job", "assemble_ahead"]

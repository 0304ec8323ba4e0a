"""Thin Celery tasks: parse ids, call a use case of jobs/, send the next message.

Bad input (BookError) fails its job and is never retried; transient failures (database or broker
blips, device errors) retry with backoff, a bounded number of times. A task that ends its job as
failed ends in Celery's FAILURE state (``JobFailed``), so Flower lists it under Failed. A worker
process loads what its queues need after the fork (``worker_process_init``), never in the parent:
CUDA is not fork-safe.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from celery import shared_task
from celery.signals import worker_process_init, worker_process_shutdown
from sqlalchemy.exc import InterfaceError, OperationalError

from jobs import assemble, batch_stream, ingest, leases, plan, speak
from jobs.celery_app import ALL_QUEUES, CPU_QUEUE, SYNTH_QUEUE, WORKER_NAME_ENV, WORKER_QUEUES_ENV, app
from jobs.lifecycle import RetryPlan, fail_job
from jobs.runtime import Runtime, open_engine, open_runtime
from jobs.settings import Settings
from jobs.status import job_statuses
from pipeline.errors import AssemblyError, TtsJobsError
from storage.models import JobState

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

_runtime: Runtime | None = None
_engine: Engine | None = None
_lock = threading.Lock()

# Connection-level faults worth retrying; everything about the book itself is final.
RETRYABLE = (ConnectionError, TimeoutError, OSError, OperationalError, InterfaceError)


class JobFailed(TtsJobsError):
    """Raised by a task after its job was recorded as failed: the task ends in Celery's FAILURE
    state, so Flower's Failed tab lists the book. Not in RETRYABLE, so Celery never retries it;
    in each task's ``throws``, so the worker logs it in one line, without a traceback."""


def raise_if_failed(job_id: int) -> None:
    """JobFailed when job ``job_id`` is recorded as failed (a use case failed it and returned)."""
    [status] = job_statuses(runtime(), job_id)
    if status.state == JobState.FAILED.value:
        raise JobFailed(f"job {job_id} failed: {status.error}")


def runtime() -> Runtime:
    """This process's runtime, built lazily (after the fork)."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = open_runtime(Settings.from_env(), upgrade_schema=False)
        return _runtime


@worker_process_init.connect
def _load_after_fork(**_: object) -> None:
    """Load and warm the model in the child process, never in the parent (CUDA is not fork-safe)."""
    queues = os.environ.get(WORKER_QUEUES_ENV, ",".join(ALL_QUEUES)).split(",")
    if SYNTH_QUEUE in queues:
        worker_engine()
    if CPU_QUEUE in queues:
        prepare_cpu_worker()
    start_lease_sweeper()


@worker_process_shutdown.connect
def _close(**_: object) -> None:
    log.info("worker process shutting down")


def worker_engine() -> Engine:
    """This process's model, loaded and warmed once, and announced to the planner."""
    global _engine
    with _lock:
        if _engine is None:
            settings = Settings.from_env()
            _engine = open_engine(settings)
            _engine.slots = settings.slots
            _engine.warm_up()
            graphs = _engine.prepare_worker_slots(settings.slots or plan.batch_rows(settings, gpu=True))
            importlib.import_module("pipeline.audio")  # the WAV writer's: now, not in the first batch
            if graphs:
                log.info("worker %s: decode slots and %d CUDA graphs ready for the widest batch",
                         synthesis_worker_name(), graphs)
    rt = runtime()
    memory = plan.device_memory_bytes(_engine)
    try:
        plan.register_synthesis_worker(rt, _engine, synthesis_worker_name(), memory)
    except Exception:  # the database may be down at start-up; batches are still halved on OOM
        log.warning("worker %s: could not record its limits for the planner", synthesis_worker_name(),
                    exc_info=True)
    cap = f"{memory * rt.settings.memory_fraction / 2**30:.1f} GiB" if memory else "none (CPU)"
    log.info("worker %s: model ready on %s (%s), memory cap %s, weights %s", synthesis_worker_name(),
             _engine.device, _engine.precision, cap, _engine.model_root)
    return _engine


def prepare_cpu_worker() -> None:
    """A CPU worker process's start-up (jobs/celery_app.py): it starts its assembly's stitch
    helpers now (they load in the background), not after the last batch of its first book, and
    loads what reading a book needs, so that its first book is read as fast as the next."""
    from pipeline.audio import AssemblyOptions, start_helpers, stitch_helpers_wanted

    start_helpers(stitch_helpers_wanted(AssemblyOptions()))
    prepare_ingest()


def prepare_ingest() -> None:
    """The readers and sentence splitter imported and the database connection opened now, not
    in the first ingest (~0.2 s cold, all of it between a submit and the first batch)."""
    try:
        ingest.prepare_ingest(runtime())
    except Exception:  # noqa: BLE001 - the database may be down at start-up; the first ingest reports it
        log.warning("could not prepare for reading books ahead of the first one", exc_info=True)


def synthesis_worker_name() -> str:
    """The Celery worker name (``gpu0@host``): OOM limits are learned per device, not per process."""
    return os.environ.get(WORKER_NAME_ENV) or f"tts@{socket.gethostname()}"


def start_lease_sweeper() -> None:
    """Resend batches whose worker went silent (host crash, OOM kill), from every live worker.

    Redis's visibility timeout also redelivers them, but it must outlast the longest batch; the
    lease on the batch row brings dead work back within minutes instead.
    """
    def sweep_forever() -> None:
        rt = runtime()
        interval = max(5.0, rt.settings.lease_seconds / 2)
        resent: dict[int, float] = {}  # batch -> when this process last resent it
        while True:
            time.sleep(interval)
            try:
                now = time.monotonic()
                for batch_id in leases.requeue_stale_batches(rt):
                    if now - resent.get(batch_id, -1e9) < rt.settings.lease_seconds:
                        continue  # one message per lease period is enough; the claim does the rest
                    resent[batch_id] = now
                    log.warning("batch=%s: its worker went silent; sending it out again", batch_id)
                    send_batch(batch_id)
            except Exception:  # a broker or database blip; the next sweep retries
                log.warning("lease sweep failed", exc_info=True)

    threading.Thread(target=sweep_forever, name="lease-sweeper", daemon=True).start()


def engine() -> Engine:
    """The loaded model (loaded now if this process was not started by a worker)."""
    return _engine if _engine is not None else worker_engine()


def worker_name() -> str:
    """This process, as batch leases name it: host and pid (a dead pid on this host frees its lease)."""
    return f"{socket.gethostname()}:{os.getpid()}"


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


@shared_task(name="tts_jobs.ingest_job", bind=True, autoretry_for=RETRYABLE, retry_backoff=True,
             retry_backoff_max=300, max_retries=8, throws=(JobFailed,))
def ingest_job(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Read job ``job_id``'s book into chapters and sentences, plan it here, then send the plan
    message as before (it finds nothing left to plan, unless planning here failed)."""
    with _failing_job_on_final_error(self, job_id):
        ready = ingest.ingest_job(runtime(), job_id)
    if not ready:
        raise_if_failed(job_id)  # a bad book; a cancelled job just stops
        return
    plan_after_ingest(job_id)
    plan_pending.apply_async(argsrepr=f"after job {job_id}", retry_policy=CONTINUATION_RETRY)


def plan_after_ingest(job_id: int) -> None:
    """Plan every unplanned sentence and send the batches, as ``plan_pending`` does, but at once:
    its message queued behind other books' ingests (one task at a time per process) and waited
    for SQLite's write lock. Two planners never take the same sentence (repo.unplanned_sentences),
    so two ingests ending together are safe. A failure leaves the work to the plan message sent
    next, as before: it retries a database blip with backoff, and reports anything else."""
    try:
        batch_ids = plan.plan_pending(runtime())
    except Exception:  # noqa: BLE001 - the plan message does it again
        log.warning("job=%s: planning after the ingest failed; the plan message will do it", job_id,
                    exc_info=True)
        return
    for batch_id in batch_ids:
        send_batch(batch_id)


@shared_task(name="tts_jobs.plan_pending", bind=True, autoretry_for=RETRYABLE, retry_backoff=True,
             retry_backoff_max=300, max_retries=8)
def plan_pending(self) -> None:  # type: ignore[no-untyped-def]
    """Cut every unplanned sentence into batches and send one message per batch."""
    for batch_id in plan.plan_pending(runtime()):
        send_batch(batch_id)


@shared_task(name="tts_jobs.synthesize_batch", bind=True, autoretry_for=RETRYABLE, retry_backoff=True,
             retry_backoff_max=300, max_retries=8)
def synthesize_batch(self, batch_id: int) -> None:  # type: ignore[no-untyped-def]
    """Speak batch ``batch_id``; hand finished jobs to assembly."""
    rt = runtime()
    speaker = engine()
    speaker.clock.reset()  # one task's GPU timeline (the clock's events would pile up otherwise)
    try:
        if rt.settings.stream_seconds > 0:
            ready: list[int] = []
            batch_stream.synthesize_stream(rt, speaker, batch_id, worker_name(), jobs_ready=send_assemblies,
                                           batch_returned=send_batch, learned_by=synthesis_worker_name())
        else:
            ready = speak.synthesize_batch(rt, speaker, batch_id, worker_name(),
                                           learned_by=synthesis_worker_name())
        log_device_time(batch_id, speaker)
    except RETRYABLE:
        raise
    except Exception as exc:
        # The batch was given back (or failed for good after max_attempts); retry the message.
        if self.request.retries < rt.settings.max_attempts:
            raise self.retry(exc=exc, countdown=5 * (self.request.retries + 1))
        raise
    send_assemblies(ready)


def log_device_time(batch_id: int, speaker: Engine) -> None:
    """Where the batch's device time went (CUDA events; host-timed on CPU): with the worker's
    "synthesized in" line this tells a slow GPU from a GPU kept waiting."""
    seconds, edges = speaker.clock.totals(), speaker.clock.edges()
    # the steps and prefills share one stream: the rest of the busy time is Decoder+Vocos alone
    alone = max(0.0, edges["busy_end"] - edges["idle_start"] - edges["idle_between"]
                - seconds["prefill"] - seconds["gpt_steps"])
    log.info("batch=%s (and the batches streamed after it): device time: prefill %.2f s, %d decode steps %.2f s, Decoder+Vocos %.2f s "
             "(%.2f s after the last step); idle %.2f s before the first and %.2f s between; "
             "Decoder+Vocos alone %.2f s of %.2f s",
             batch_id, seconds["prefill"], speaker.clock.steps, seconds["gpt_steps"], seconds["waveform"],
             edges["tail"], edges["idle_start"], edges["idle_between"], alone, edges["busy_end"])
    calls = speaker.clock.driver_calls()
    if calls:
        log.info("batch=%s: allocator calls to the driver meanwhile: cudaMalloc %d, cudaFree %d, "
                 "retries %d, pinned host blocks made %d, freed %d", batch_id, calls["num_device_alloc"],
                 calls["num_device_free"], calls["num_alloc_retries"], calls["num_host_alloc"],
                 calls["num_host_free"])


@shared_task(name="tts_jobs.assemble_job", bind=True, autoretry_for=RETRYABLE, retry_backoff=True,
             retry_backoff_max=300, max_retries=8, throws=(JobFailed,))
def assemble_job(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Stitch job ``job_id``'s audio into its audiobook files."""
    try:
        with _failing_job_on_final_error(self, job_id):
            assemble.assemble_job(runtime(), job_id)
    except AssemblyError as exc:  # recorded on the job; bad audio is not retried
        raise JobFailed(f"job {job_id} failed: {exc}") from exc


# Messages carry ids only; argsrepr makes them readable on Flower's screens. A message that
# continues work already recorded keeps trying through a broker outage: losing it would leave a
# job half-way with nothing to wake it. (`submit` uses Celery's short default and reports failure.)
CONTINUATION_RETRY = {"max_retries": 120, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 5.0}


def send_ingest(job_id: int) -> None:
    ingest_job.apply_async((job_id,), argsrepr=f"job {job_id}")


def send_batch(batch_id: int) -> None:
    synthesize_batch.apply_async((batch_id,), argsrepr=f"batch {batch_id}", retry_policy=CONTINUATION_RETRY)


def send_assembly(job_id: int) -> None:
    assemble_job.apply_async((job_id,), argsrepr=f"job {job_id}", retry_policy=CONTINUATION_RETRY)


def send_assemblies(job_ids: list[int]) -> None:
    for job_id in job_ids:
        send_assembly(job_id)


def enqueue_next(retry: RetryPlan) -> None:
    """Send the message that continues a retried job."""
    if retry.next_step == "ingest":
        send_ingest(retry.job_id)
    elif retry.next_step == "plan":
        plan_pending.apply_async(argsrepr=f"retry of job {retry.job_id}")
    else:
        send_assembly(retry.job_id)


__all__ = ["app", "ingest_job", "plan_pending", "synthesize_batch", "assemble_job", "enqueue_next"]

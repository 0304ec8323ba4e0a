"""A worker process's life: what it loads after the fork, its runtime and model, and the sweep
that keeps every stage moving (jobs/cluster/reconcile.py), from every live worker.

Celery forks the pool processes; CUDA is not fork-safe, so the model loads in the child
(``worker_process_init``), never in the parent. The first sweep runs at once: a replacement
child finds the batches its killed sibling held and puts them back in the queue, in their place.
"""

from __future__ import annotations

import importlib
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from celery.signals import worker_process_init, worker_process_shutdown

from jobs import faults, ingest, plan
from jobs.batches import cleanup
from jobs.cluster import health, messages, reconcile
from jobs.cluster.celery_app import ALL_QUEUES, CPU_QUEUE, SYNTH_QUEUE
from jobs.leases import this_process
from jobs.runtime import Runtime, open_engine, open_runtime
from jobs.settings import Settings, process_environment

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class WorkerSetup:
    """What `tts-jobs worker` started this worker as: its queues, its Celery name and its settings."""

    queues: tuple[str, ...]
    name: str
    settings: Settings


_setup: WorkerSetup | None = None
_runtime: Runtime | None = None
_engine: Engine | None = None
_lock = threading.Lock()


def prepare(setup: WorkerSetup) -> None:
    """Called by the worker's main process before the pool forks: the pool processes inherit it."""
    global _setup
    _setup = setup


def _settings() -> Settings:
    return _setup.settings if _setup is not None else Settings.from_env()


def runtime() -> Runtime:
    """This process's runtime, built lazily (after the fork)."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = open_runtime(_settings(), upgrade_schema=False)
        return _runtime


@worker_process_init.connect
def _load_after_fork(**_: object) -> None:
    """Load and warm the model in the child process, never in the parent (CUDA is not fork-safe)."""
    queues = _setup.queues if _setup is not None else ALL_QUEUES
    if SYNTH_QUEUE in queues:
        worker_engine()
    if CPU_QUEUE in queues:
        prepare_cpu_worker()
    if _setup is not None:  # a worker started by `tts-jobs worker` says it is ready (health.py)
        health.stamp(health.ready_file(_setup.name))
    start_sweeper()


@worker_process_shutdown.connect
def _close(**_: object) -> None:
    if _setup is not None:
        health.remove(health.ready_file(_setup.name), only_own=True)
    log.info("worker process shutting down")


def worker_engine() -> Engine:
    """This process's model, loaded and warmed once, and announced to the planner."""
    global _engine
    with _lock:
        if _engine is None:
            settings = _settings()
            _engine = open_engine(settings)
            _engine.slots = settings.slots
            _engine.warm_up(settings.calibration_file)
            slots = settings.slots or plan.scheduling_policy(settings, gpu_worker=True).batch_rows
            _engine.prepare_worker_slots(slots)  # it says what it prepared
            importlib.import_module("pipeline.audio.wavio")  # the WAV writer: now, not in the first batch
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


def engine() -> Engine:
    """The loaded model (loaded now if this process was not started by a worker)."""
    return _engine if _engine is not None else worker_engine()


def prepare_cpu_worker() -> None:
    """A CPU worker process's start-up: its assembly's stitch helpers start now (they load in the
    background), not after the last batch of its first book, and what reading a book needs loads,
    so that its first book is read as fast as the next."""
    from pipeline.audio import AssemblyOptions
    from pipeline.audio.stitch_helpers import set_helper_environment, start_helpers, stitch_helpers_wanted

    set_helper_environment(process_environment())
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
    return _setup.name if _setup is not None else f"tts@{socket.gethostname()}"


def worker_name() -> str:
    """This process, as leases name it: host and pid (a dead pid on this host frees its lease)."""
    return this_process()


def start_sweeper() -> None:
    """Sweep now, then every ``max(5, lease / 4)`` seconds (30 s by default), in a thread of this
    process: with the reconciler's 30-s grace, stranded work moves again within a minute."""
    def sweep_forever() -> None:
        rt = runtime()
        interval = max(5.0, rt.settings.lease_seconds / 4)
        try:
            cleanup.remove_orphan_files(rt)
        except Exception:  # noqa: BLE001 - tidying must not keep a worker from working
            log.warning("could not look for orphan files", exc_info=True)
        while True:
            sweep(rt)
            time.sleep(interval)

    threading.Thread(target=sweep_forever, name="sweeper", daemon=True).start()


def sweep(rt: Runtime) -> None:
    """Send again whatever nothing will move (jobs/cluster/reconcile.py), and remove the temporary
    files a killed writer left in the jobs in flight; a blip waits for the next sweep."""
    try:
        cleanup.remove_dead_writers_of_jobs(rt)
        resends = reconcile.stranded_work(rt)
        if resends:
            faults.after_commit("reconcile")
        for job_id in resends.ingest:
            messages.send_ingest(rt, job_id, continuation=True)
        for job_id in resends.plan:
            messages.send_plan(f"unplanned sentences of job {job_id}")
        messages.send_batches(rt, resends.batches)
        messages.send_assemblies(rt, resends.assemble)
    except Exception:  # a broker or database blip; the next sweep retries
        log.warning("sweep failed", exc_info=True)

"""How worker processes are started: one per GPU, pinned before torch is imported.

A GPU worker sees exactly one device, as cuda:0: it is started with CUDA_VISIBLE_DEVICES set to
its GPU in its own environment (``pinned_environment``), by the supervisor of ``--gpus`` or, for
``--gpu N``, by replacing the process with itself so started. Its queues, name and settings reach
its pool processes through the fork (``worker_process.prepare``), not through the environment.

A GPU worker is a prefork pool with one child (not ``solo``, so time limits, heartbeats and child
recycling work); the child loads the model after the fork, so CUDA is never touched in a parent.

Every worker shows that it is alive and that it is ready in files a container's health check
reads (jobs/cluster/health.py, docker-compose.yml): its main process stamps the alive file at each
heartbeat it sends to the broker; its pool process writes the ready file once it can work (a GPU
worker's model loaded and warmed up).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from jobs.cluster import health
from jobs.cluster.celery_app import ALL_QUEUES, CPU_QUEUE, SYNTH_QUEUE
from jobs.settings import Settings, child_environment

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class WorkerSpec:
    queues: tuple[str, ...]
    concurrency: int
    name: str
    gpu: int | None = None


def worker_spec(queues: str | None, concurrency: int, gpu: int | None, cpu: bool, name: str | None) -> WorkerSpec:
    host = socket.gethostname()
    if gpu is not None:
        return WorkerSpec(queues=(SYNTH_QUEUE,), concurrency=1, name=name or f"gpu{gpu}@{host}", gpu=gpu)
    if cpu:
        return WorkerSpec(queues=(CPU_QUEUE,), concurrency=max(concurrency, 1), name=name or f"cpu@{host}")
    chosen = tuple(q.strip() for q in (queues or ",".join(ALL_QUEUES)).split(",") if q.strip())
    unknown = [q for q in chosen if q not in ALL_QUEUES]
    if unknown:
        raise SystemExit(f"error: unknown queue {', '.join(unknown)}: use {', '.join(ALL_QUEUES)}")
    return WorkerSpec(queues=chosen, concurrency=concurrency, name=name or f"tts@{host}")


def assembles(spec: WorkerSpec) -> bool:
    """Whether the worker serves the CPU queue, whose tasks assemble the finished audiobooks."""
    return CPU_QUEUE in spec.queues


def run_worker(spec: WorkerSpec, loglevel: str, settings: Settings) -> int:
    """Become a Celery worker until shutdown. Returns its exit code: 0 after a shutdown asked for
    (SIGTERM, SIGINT), non-zero when the worker stopped on an error, so that a supervisor
    (systemd's Restart=, compose's restart:) starts it again."""
    if spec.gpu is not None and settings.visible_gpus != str(spec.gpu):
        _become_pinned_worker(spec, spec.gpu, loglevel, settings)
    yield_to_gpu_feeders(spec, settings)
    name = spec.name.replace("%h", socket.gethostname())
    # the tasks and their after-fork hooks, registered before the pool forks
    from jobs.cluster import worker_process
    from jobs.cluster.tasks import app

    worker_process.prepare(worker_process.WorkerSetup(queues=spec.queues, name=name, settings=settings))

    health.clear_for_start(name)
    health.report_liveness(name)
    log.info("worker %s: queues %s, %d process(es)%s", spec.name, ",".join(spec.queues), spec.concurrency,
             f", GPU {spec.gpu}" if spec.gpu is not None else "")
    # app.start, not app.worker_main, which drops the worker's exit code (Celery's EX_FAILURE
    # after an "Unrecoverable error" would otherwise end `tts-jobs worker` with status 0)
    code = app.start([
        "worker", "--pool", "prefork", "--concurrency", str(spec.concurrency),
        "--queues", ",".join(spec.queues), "--hostname", spec.name, "--loglevel", loglevel,
        "--without-gossip", "--without-mingle",
    ])
    health.remove(health.alive_file(name))
    health.remove(health.ready_file(name))
    if code:
        log.error("worker %s stopped with exit code %s", spec.name, code)
    return int(code or 0)


def pinned_environment(gpu: int, settings: Settings) -> dict[str, str]:
    """The environment of a worker pinned to ``gpu``: it sees that one device, as cuda:0, and
    runs on it (CUDA_VISIBLE_DEVICES is read when CUDA starts, so it is set before the process is)."""
    changes = {"CUDA_VISIBLE_DEVICES": str(gpu), "TTS_JOBS_DEVICE": "cuda" if settings.device == "auto"
               else settings.device}
    if settings.memory_gib is not None:  # --memory-gib, for the pinned process's own settings
        changes["TTS_JOBS_MEMORY_GIB"] = f"{settings.memory_gib:g}"
    return child_environment(**changes)


def _become_pinned_worker(spec: WorkerSpec, gpu: int, loglevel: str, settings: Settings) -> None:
    """Replace this process with the same worker started in its GPU's environment (same pid, so
    signals and a supervisor's view are unchanged)."""
    argv = [sys.executable, "-m", "jobs.cli", "worker", "--gpu", str(gpu), "--name", spec.name,
            "--loglevel", loglevel]
    os.execve(sys.executable, argv, pinned_environment(gpu, settings))


def yield_to_gpu_feeders(spec: WorkerSpec, settings: Settings) -> None:
    """A worker of the CPU queue alone lowers its priority (TTS_JOBS_CPU_WORKER_NICE, inherited
    by its pool processes). Assembly uses every core; on a GPU host it ran beside the synthesis
    workers, whose host threads queue the decode steps, and a batch that takes 4 s took 16 s
    (two H200s, docs/benchmarks.md). Niced, it uses the cores the GPU workers leave idle."""
    if SYNTH_QUEUE in spec.queues:
        return
    niceness = settings.cpu_worker_nice
    if niceness > 0:
        os.nice(niceness)
        log.info("worker %s: niceness +%d (yields the CPU to GPU workers)", spec.name, niceness)


def parse_gpu_list(value: str, visible: str | None) -> list[int]:
    """'all' (the GPUs ``visible`` lists, CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi
    lists) or '0,1,3'."""
    if value.strip().lower() != "all":
        return [int(v) for v in value.split(",") if v.strip()]
    if visible:
        return [int(v) for v in visible.split(",") if v.strip()]
    return list(range(count_gpus()))


def count_gpus() -> int:
    """Count GPUs without initialising CUDA in this (parent) process."""
    if shutil.which("nvidia-smi") is None:
        raise SystemExit("error: --gpus all needs nvidia-smi to count GPUs; pass a list like --gpus 0,1")
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def supervise_gpu_workers(gpu_ids: list[int], loglevel: str, settings: Settings) -> int:
    """Run one pinned worker per GPU as child processes; restart any that dies; stop all on SIGTERM."""
    if not gpu_ids:
        print("error: no GPUs to serve", file=sys.stderr)
        return 2
    children: dict[int, subprocess.Popen] = {g: _start_gpu_worker(g, loglevel, settings) for g in gpu_ids}
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts: dict[int, float] = {}
    while not stopping:
        time.sleep(1.0)
        for gpu, child in list(children.items()):
            if child.poll() is not None and not stopping:
                delay = min(60.0, restarts.get(gpu, 1.0) * 2)
                log.error("gpu%d worker exited with %s; restarting in %.0f s", gpu, child.returncode, delay)
                time.sleep(delay)
                restarts[gpu] = delay
                children[gpu] = _start_gpu_worker(gpu, loglevel, settings)
    for child in children.values():
        child.wait()
    return 0


def _start_gpu_worker(gpu: int, loglevel: str, settings: Settings) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen([sys.executable, "-m", "jobs.cli", "worker", "--gpu", str(gpu),
                             "--loglevel", loglevel], env=pinned_environment(gpu, settings))

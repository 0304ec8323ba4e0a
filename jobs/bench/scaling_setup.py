"""What a phase of the workers' scaling measurement is made of: the mode (GPU or CPU smoke), the
read-only queries on the phase's job table, and the environment its `tts-jobs` processes share."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import case, create_engine, func, select

from jobs.settings import process_environment
from pipeline.bench.kit import Tools
from pipeline.bench.processes import REPO, TTS_JOBS, WorkerProcess
from pipeline.bench.run_log import STARTED, RunFailed
from storage.models import Batch, Job, Sentence, SentenceState, Worker

# ------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Mode:
    """What differs between the GPU measurement and the CPU smoke test."""

    name: str
    weights: str  # `tts-jobs model synthetic --size`
    device: str  # TTS_JOBS_DEVICE
    precision: str | None  # TTS_JOBS_PRECISION (None: the project's default)
    sentences_per_book: int
    chapters_per_book: int
    budget_s: float  # the whole run stops waiting after this long
    max_batch: int | None = None  # TTS_JOBS_MAX_BATCH (None: the project's default, 1024 on a GPU)
    extra_env: tuple[tuple[str, str], ...] = ()  # for every tts-jobs process

    def synthesis_worker_args(self, index: int) -> list[str]:
        """`tts-jobs worker` arguments of synthesis worker ``index`` (pinned to GPU ``index`` on CUDA)."""
        if self.device == "cuda":
            return ["worker", "--gpu", str(index), "--name", synthesis_worker_name(self, index)]
        return ["worker", "--queues", "synth", "--name", synthesis_worker_name(self, index)]


GPU_MODE = Mode(name="gpu", weights="full", device="cuda", precision="fp16",
                sentences_per_book=5000, chapters_per_book=20, budget_s=510)
# One torch thread per process: two synthesis workers on a small CPU must not fight over its cores.
CPU_SMOKE_MODE = Mode(name="cpu-smoke", weights="tiny", device="cpu", precision=None,
                      sentences_per_book=30, chapters_per_book=2, budget_s=1500,
                      extra_env=(("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1")))


def synthesis_worker_name(mode: Mode, index: int) -> str:
    prefix = "gpu" if mode.device == "cuda" else "synth"
    return f"{prefix}{index}@{socket.gethostname()}"


def seconds_left(mode: Mode) -> float:
    return mode.budget_s - (time.monotonic() - STARTED)


# ------------------------------------------------------------------------------------ the job table


class JobTable:
    """Read-only queries on one phase's database (plain connections: no write lock is taken)."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)

    def registered_workers(self) -> set[str]:
        with self.engine.connect() as connection:
            return set(connection.scalars(select(Worker.name)))

    def jobs(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(Job.id, Job.state, Job.error, Job.created_at, Job.finished_at,
                                             Job.outputs).order_by(Job.id))
            return [dict(row._mapping) for row in rows]

    def sentences(self) -> tuple[int, int, float]:
        """(sentences, sentences done, seconds of audio)."""
        with self.engine.connect() as connection:
            is_done = case((Sentence.state == SentenceState.DONE.value, 1), else_=0)
            total, done, audio = connection.execute(select(
                func.count(Sentence.id), func.sum(is_done), func.sum(Sentence.audio_seconds))).one()
        return int(total or 0), int(done or 0), float(audio or 0.0)

    def batches(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(Batch.id, Batch.state, Batch.size, Batch.leased_by, Batch.created_at,
                                             Batch.leased_at, Batch.finished_at, Batch.attempts))
            return [dict(row._mapping) for row in rows]

    def close(self) -> None:
        self.engine.dispose()


def seconds_between(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 2)


@dataclass
class Phase:
    """Everything one phase needs: its workers, environment and folder."""

    name: str
    synthesis_workers: int
    mode: Mode
    folder: Path
    env: dict[str, str]
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def database_url(self) -> str:
        return self.env["TTS_JOBS_DATABASE_URL"]


def phase_env(mode: Mode, tools: Tools, data_dir: Path, redis_url: str, weights: Path) -> dict[str, str]:
    env = {**process_environment(), "TTS_JOBS_DATA_DIR": str(data_dir),
           "TTS_JOBS_DATABASE_URL": f"sqlite:///{data_dir / 'tts-jobs.db'}", "TTS_JOBS_BROKER_URL": redis_url,
           "TTS_JOBS_MODEL_DIR": str(weights), "TTS_JOBS_DEVICE": mode.device, "PYTHONUNBUFFERED": "1",
           # each phase's workers compile their Triton kernels from nothing (in their warm-up), so
           # both phases start equally cold whatever the user's cache holds
           "TRITON_CACHE_DIR": str(data_dir / "triton-cache"),
           **dict(mode.extra_env)}
    if mode.precision:
        env["TTS_JOBS_PRECISION"] = mode.precision
    if mode.max_batch:
        env["TTS_JOBS_MAX_BATCH"] = str(mode.max_batch)
    if tools.path_prefix:
        env["PATH"] = os.pathsep.join([tools.path_prefix, env.get("PATH", "")])
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(TTS_JOBS + args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise RunFailed(f"tts-jobs {' '.join(args)} exited with {done.returncode}: "
                        f"{done.stderr.strip()[-2000:]}")
    return done.stdout

"""How worker processes are named, pinned and given queues (no GPU needed to check the plan)."""

from __future__ import annotations

import socket

import pytest

from jobs.cluster import workers


def test_a_gpu_worker_takes_only_synthesis_one_batch_at_a_time_and_is_named_after_its_gpu() -> None:
    spec = workers.worker_spec(queues=None, concurrency=4, gpu=3, cpu=False, name=None)
    assert spec == workers.WorkerSpec(queues=("synth",), concurrency=1, name=f"gpu3@{socket.gethostname()}", gpu=3)


def test_a_cpu_worker_takes_ingestion_planning_and_assembly() -> None:
    spec = workers.worker_spec(queues=None, concurrency=4, gpu=None, cpu=True, name=None)
    assert spec.queues == ("cpu",) and spec.concurrency == 4 and spec.gpu is None


def test_a_plain_worker_serves_every_queue_and_unknown_queues_are_refused() -> None:
    assert workers.worker_spec(None, 1, None, False, None).queues == ("cpu", "synth")
    with pytest.raises(SystemExit, match="unknown queue gpu"):
        workers.worker_spec("cpu,gpu", 1, None, False, None)


def test_gpu_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    assert workers.parse_gpu_list("0, 2") == [0, 2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert workers.parse_gpu_list("all") == [1, 3]


@pytest.mark.parametrize("kind,env_nice,expected", [
    ("cpu", None, 10),  # ingest/plan/assembly yield the cores to the GPU workers' host threads
    ("cpu", "3", 3),
    ("cpu", "0", 0),
    ("gpu", None, 0),  # a GPU worker feeds its GPU at full priority
    ("all", None, 0),  # a worker that also synthesizes is not slowed down
])
def test_a_cpu_only_worker_lowers_its_priority(kind: str, env_nice: str | None, expected: int) -> None:
    import os
    import subprocess
    import sys

    spec = {"cpu": "worker_spec(None, 2, None, True, None)",
            "gpu": "worker_spec(None, 1, 0, False, None)",
            "all": "worker_spec(None, 1, None, False, None)"}[kind]
    env = {k: v for k, v in os.environ.items() if k != "TTS_JOBS_CPU_WORKER_NICE"}
    if env_nice is not None:
        env["TTS_JOBS_CPU_WORKER_NICE"] = env_nice
    code = ("import os; from jobs.cluster.workers import worker_spec, yield_to_gpu_feeders; "
            f"before = os.nice(0); yield_to_gpu_feeders({spec}); print(os.nice(0) - before)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == expected

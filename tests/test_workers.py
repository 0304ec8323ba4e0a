"""How worker processes are named, pinned and given queues (no GPU needed to check the plan)."""

from __future__ import annotations

import os
import socket

import pytest

from jobs.cluster import workers
from jobs.settings import Settings


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


def test_gpu_lists() -> None:
    assert workers.parse_gpu_list("0, 2", None) == [0, 2]
    assert workers.parse_gpu_list("all", "1,3") == [1, 3]  # the GPUs this process may see


def test_a_pinned_worker_is_started_with_its_gpu_in_its_own_environment_not_ours(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    settings = Settings.from_env().with_overrides(memory_gib=7.5)

    env = workers.pinned_environment(2, settings)

    assert (env["CUDA_VISIBLE_DEVICES"], env["TTS_JOBS_DEVICE"], env["TTS_JOBS_MEMORY_GIB"]) == ("2", "cuda", "7.5")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert Settings.from_env(env).visible_gpus == "2"  # so the started worker runs, not pins again


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
            "from jobs.settings import Settings; "
            f"before = os.nice(0); yield_to_gpu_feeders({spec}, Settings.from_env()); print(os.nice(0) - before)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == expected

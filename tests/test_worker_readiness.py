"""A synthesis worker is ready only once its model has loaded and warmed up (it has spoken): a
real `tts-jobs worker` on the tiny synthetic weights (CPU), its health files read as the
compose health check reads them."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import env_for
from tests.e2e_helpers import TTS_JOBS, read_log, terminate
from tests.test_flower import wait_until


@pytest.mark.slow
def test_a_synthesis_worker_is_ready_once_its_model_is_loaded(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "TMPDIR": str(tmp_path)}
    alive, ready = tmp_path / "tts-jobs-alive" / "gpu0@ready-test", tmp_path / "tts-jobs-ready" / "gpu0@ready-test"
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen([*TTS_JOBS, "worker", "--queues", "synth", "--concurrency", "1",
                                   "--name", "gpu0@ready-test"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        wait_until(ready.exists, 180, f"the worker to be ready (log: {read_log(log_path)[-2000:]})")
        assert "model ready" in read_log(log_path)  # written after the load and the warm-up
        pool_pid, host = ready.read_text().split()
        assert host == socket.gethostname() and int(pool_pid) != worker.pid
        assert Path(f"/proc/{pool_pid}").exists()
        wait_until(alive.exists, 30, "the first heartbeat")
        assert alive.read_text().split() == [str(worker.pid), host]
    finally:
        terminate(worker)
    assert not ready.exists() and not alive.exists(), "a stopped worker is neither ready nor alive"

"""The processes of a whole-run measurement: a private redis-server, `tts-jobs` workers in their
own process groups, and their orderly stop (SIGTERM, then SIGKILL for what is left)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jobs.settings import child_environment
from pipeline.bench.kit import Tools
from pipeline.bench.run_log import RunFailed, progress

REPO = Path(__file__).resolve().parents[2]
TTS_JOBS = [sys.executable, "-m", "jobs.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def redis_running(tools: Tools, folder: Path) -> Iterator[int]:
    """A private redis-server on a free port (no persistence); stopped on exit. Yields the port."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [str(tools.redis_server), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(folder), "--logfile", str(folder / "redis.log")]
    server = subprocess.Popen(command, env=child_environment(**tools.redis_env), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_for_redis(port, server)
        progress(f"redis-server pid {server.pid} on 127.0.0.1:{port}")
        yield port
    finally:
        stop_process_groups([server])


def wait_for_redis(port: int, server: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RunFailed(f"redis-server exited with {server.returncode} at start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                if connection.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RunFailed(f"redis-server did not answer on port {port} within {timeout:.0f} s")


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def is_ready(self) -> bool:
        """Celery logs 'NAME ready.' once connected; the model loads in the pool child after that,
        so a synthesis worker is ready only once it has also registered (see wait_until_ready)."""
        return f"{self.name} ready." in self.log_text()


def start_worker(name: str, args: list[str], env: dict[str, str], log_path: Path) -> WorkerProcess:
    """`tts-jobs ARGS` in its own process group (so that stopping it stops its pool's children)."""
    with open(log_path, "wb") as log_file:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(TTS_JOBS + args + ["--loglevel", "INFO"], env=env, cwd=REPO,
                                   stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    progress(f"started {name}: pid {process.pid}: tts-jobs {' '.join(args)}")
    return WorkerProcess(name=name, process=process, log_path=log_path)


def stop_process_groups(processes: list[subprocess.Popen[bytes]], grace: float = 15) -> None:
    """SIGTERM each process's group (Celery: warm shutdown), SIGKILL what is left after ``grace`` s."""
    signal_groups(processes, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            progress(f"pid {process.pid} still running after {grace:.0f} s; killing its process group")
    signal_groups(processes, signal.SIGKILL)  # also any pool child that outlived its parent
    for process in processes:
        process.wait(timeout=10)


def signal_groups(processes: list[subprocess.Popen[bytes]], sig: signal.Signals) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, sig)  # each was started in its own session: group id = its pid
        except ProcessLookupError:
            pass


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None

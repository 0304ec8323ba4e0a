"""`tts-jobs flower` for real: Flower against the test Redis, a real worker, a real book.

What an operator notices: Flower does not start open to the network; with credentials it shows
the worker and every task of a job by name; without them it answers 401; read-only mode refuses
control calls (the worker survives a shutdown request); the task list shows each task's job or
batch, and a book that failed is listed under Failed tasks, never retried.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from jobs.cluster.flower import FlowerOptions, flower_argv
from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, popen_worker, read_log, status_json, terminate, wait_for_final_state

ROOT = Path(__file__).resolve().parent.parent
# The ops commands through the real console entry point (registered here until jobs/cli/main.py does it).
OPS_CLI = [sys.executable, "-m", "jobs.cli"]
CREDENTIALS = ("ops", "s3cret-flower")
TASK_NAMES = {"tts_jobs.ingest_job", "tts_jobs.plan_pending", "tts_jobs.synthesize_batch",
              "tts_jobs.assemble_ahead", "tts_jobs.assemble_job"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ops(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(OPS_CLI + args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def popen_flower(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    log = open(log_path, "w")  # noqa: SIM115 - the process owns it until it exits
    return subprocess.Popen(OPS_CLI + ["flower", *args], env=env, cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except requests.ConnectionError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture()
def flower_env(settings_factory, redis_url: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    for name in [n for n in env if n.startswith("FLOWER_")]:
        del env[name]  # only what each test sets
    return env


# ---------------------------------------------------------------- refusing to start


def test_flower_refuses_to_start_without_credentials(flower_env: dict[str, str]) -> None:
    result = run_ops(["flower", "--port", str(free_port())], flower_env)

    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: FLOWER_BASIC_AUTH is not set") and "--local" in line


@pytest.mark.parametrize("value", ["just-a-user", "ops:", ":password", "ops:pw,other"])
def test_flower_refuses_malformed_credentials(flower_env: dict[str, str], value: str) -> None:
    result = run_ops(["flower", "--port", str(free_port())], {**flower_env, "FLOWER_BASIC_AUTH": value})

    assert result.returncode == 2
    assert "FLOWER_BASIC_AUTH must be user:password" in result.stderr


def test_local_mode_cannot_be_combined_with_another_address(flower_env: dict[str, str]) -> None:
    result = run_ops(["flower", "--local", "--address", "0.0.0.0", "--port", str(free_port())], flower_env)

    assert result.returncode == 2
    assert "--local binds 127.0.0.1 only" in result.stderr


def test_local_mode_runs_without_a_password_on_loopback_only(tmp_path: Path,
                                                             flower_env: dict[str, str]) -> None:
    port = free_port()
    flower = popen_flower(["--local", "--port", str(port)], flower_env, tmp_path / "flower.log")
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200, 60,
                   "the local Flower UI")
        assert listening_addresses(port) == {"127.0.0.1"}
    finally:
        terminate(flower)
    log = read_log(tmp_path / "flower.log")
    assert "NO password (local mode: reachable from this machine only)" in log, log


def test_the_task_list_shows_arguments_unless_the_operator_chose_other_columns() -> None:
    default = flower_argv(FlowerOptions(local=True), {})
    assert "--tasks_columns=name,args,state,received,runtime,worker,exception,uuid" in default
    chosen = flower_argv(FlowerOptions(local=True), {"FLOWER_TASKS_COLUMNS": "name,uuid"})
    assert not [arg for arg in chosen if arg.startswith("--tasks_columns")]  # Flower reads the variable


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a listening TCP socket on ``port`` (Linux /proc/net)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6,
                                           _proc_net_address(address)))
    return found


def _proc_net_address(hex_address: str) -> bytes:
    # /proc/net stores each 32-bit word of the address in host (little-endian) order.
    raw = bytes.fromhex(hex_address)
    return b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))


# ---------------------------------------------------------------- the real thing


@pytest.fixture()
def flower_with_auth(tmp_path: Path, flower_env: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """Flower with basic auth (read-only by default) on a free port: (base URL, environment)."""
    env = {**flower_env, "FLOWER_BASIC_AUTH": ":".join(CREDENTIALS)}
    port = free_port()
    flower = popen_flower(["--port", str(port)], env, tmp_path / "flower.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{base}/healthcheck", timeout=5).status_code == 200, 60,
                   f"Flower to answer (log: {read_log(tmp_path / 'flower.log')[-2000:]})")
        yield base, env
    finally:
        terminate(flower)


@pytest.mark.slow
def test_flower_shows_the_worker_and_the_jobs_tasks_behind_basic_auth(
        tmp_path: Path, flower_with_auth: tuple[str, dict[str, str]]) -> None:
    base, env = flower_with_auth
    book = write_epub(tmp_path / "book.epub", "Watched Book", [("Only", ["A short sentence to watch."])])
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        workers = wait_until(lambda: _alive_workers(base), 120, "the worker to show up in Flower")
        submitted = cli(["submit", str(book)], env)
        assert submitted.returncode == 0, submitted.stderr
        job = int(submitted.stdout.strip())
        status = wait_for_final_state(env, job)
        assert status["state"] == "done", (status, read_log(tmp_path / "worker.log")[-4000:])
        tasks = wait_until(lambda: _finished_tasks(base), 60, "Flower to record all five tasks")

        assert {t["name"] for t in tasks} == TASK_NAMES
        assert all(t["state"] == "SUCCESS" and t["worker"] in workers for t in tasks)
        args = {t["name"]: t["args"] for t in tasks}  # what the task list shows, in words
        assert args["tts_jobs.ingest_job"] == args["tts_jobs.assemble_job"] == f"job {job}"
        assert args["tts_jobs.assemble_ahead"] == f"job {job}"
        assert re.fullmatch(r"batch \d+", args["tts_jobs.synthesize_batch"])

        _assert_credentials_are_required(base)
        _assert_control_is_refused(base, next(iter(workers)), tasks[0]["uuid"])
        assert worker.poll() is None, "the worker must survive a refused shutdown request"
        assert _alive_workers(base) == workers
    finally:
        terminate(worker)



@pytest.mark.slow
def test_failed_books_are_listed_under_failed_tasks_with_their_job_in_the_columns(
        tmp_path: Path, flower_with_auth: tuple[str, dict[str, str]]) -> None:
    base, env = flower_with_auth
    unreadable = _submit(write_epub(tmp_path / "a.epub", "Torn Book", [("One", ["Soon unreadable."])]), env)
    # The stored copy is what the worker reads: damaged after the submit checked it.
    (Path(env["TTS_JOBS_DATA_DIR"]) / "jobs" / str(unreadable) / "source.epub").write_bytes(b"not a zip")
    out_root = tmp_path / "audiobooks"
    unwritable = _submit(write_epub(tmp_path / "b.epub", "Homeless Book", [("One", ["No place to go."])]), env,
                         "--out", str(out_root))
    shutil.rmtree(out_root)
    out_root.write_text("a file where the output folder should be")  # assembly cannot create its folder
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        for job in (unreadable, unwritable):
            assert wait_for_final_state(env, job)["state"] == "failed", read_log(tmp_path / "worker.log")[-4000:]
        columns = _task_list_columns(base)
        rows = wait_until(lambda: _at_least(2, _task_rows(base, columns, "state:FAILURE")), 60,
                          "Flower to list both failed tasks")
        everything = _task_rows(base, columns, "")
    finally:
        terminate(worker)

    assert {"name", "args", "state", "exception"} <= set(columns)
    failed = sorted((row["name"], row["args"]) for row in rows)
    assert failed == [("tts_jobs.assemble_job", f"job {unwritable}"), ("tts_jobs.ingest_job", f"job {unreadable}")]
    errors = {row["args"]: row["exception"] for row in rows}
    assert "not a readable ZIP archive" in errors[f"job {unreadable}"]
    assert "cannot create the directory" in errors[f"job {unwritable}"]
    assert status_json(env, unwritable)["error"] in errors[f"job {unwritable}"]
    # Failed for good: no task was retried, and the unreadable book got no further than its ingest.
    assert all(row["state"] != "RETRY" for row in everything)
    assert [row["name"] for row in everything if row["args"] == f"job {unreadable}"] == ["tts_jobs.ingest_job"]
    log = read_log(tmp_path / "worker.log")
    assert "Traceback" not in log, log[-4000:]


def _at_least(count: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return rows if len(rows) >= count else None


def _submit(book: Path, env: dict[str, str], *options: str) -> int:
    submitted = cli(["submit", str(book), *options], env)
    assert submitted.returncode == 0, submitted.stderr
    return int(submitted.stdout.strip())


def _task_list_columns(base: str) -> list[str]:
    """The columns of Flower's task list, as its page lays them out."""
    page = requests.get(f"{base}/tasks", auth=CREDENTIALS, timeout=10)
    page.raise_for_status()
    return re.findall(r'<th data-column="(\w+)">', page.text)


def _task_rows(base: str, columns: list[str], search: str) -> list[dict[str, Any]]:
    """The rows of the task list as its page asks for them; ``state:FAILURE`` is the Failed tab."""
    query = {"draw": "1", "start": "0", "length": "100", "search[value]": search,
             "order[0][column]": str(columns.index("name")), "order[0][dir]": "asc"}
    query.update({f"columns[{i}][data]": name for i, name in enumerate(columns)})
    response = requests.get(f"{base}/tasks/datatable", params=query, auth=CREDENTIALS, timeout=10)
    response.raise_for_status()
    return [{name: row.get(name) for name in columns} for row in response.json()["data"]]


def _alive_workers(base: str) -> set[str]:
    response = requests.get(f"{base}/api/workers", params={"status": "true"}, auth=CREDENTIALS, timeout=10)
    response.raise_for_status()
    return {name for name, alive in response.json().items() if alive}


def _finished_tasks(base: str) -> list[dict[str, Any]]:
    response = requests.get(f"{base}/api/tasks", auth=CREDENTIALS, timeout=10)
    response.raise_for_status()
    tasks = [{**task, "uuid": uuid} for uuid, task in response.json().items()]
    done = {t["name"] for t in tasks if t["state"] == "SUCCESS"}
    return tasks if done >= TASK_NAMES else []


def _assert_credentials_are_required(base: str) -> None:
    for path in ("/", "/api/workers", "/api/tasks"):
        assert requests.get(f"{base}{path}", timeout=10).status_code == 401, path
        assert requests.get(f"{base}{path}", auth=("ops", "wrong"), timeout=10).status_code == 401, path


def _assert_control_is_refused(base: str, worker: str, task_id: str) -> None:
    shutdown = requests.post(f"{base}/api/worker/shutdown/{worker}", auth=CREDENTIALS, timeout=10)
    assert shutdown.status_code == 403 and "Read only" in shutdown.text
    revoke = requests.post(f"{base}/api/task/revoke/{task_id}", auth=CREDENTIALS, timeout=10)
    assert revoke.status_code == 403
    unauthenticated = requests.post(f"{base}/api/worker/shutdown/{worker}", timeout=10)
    assert unauthenticated.status_code == 401

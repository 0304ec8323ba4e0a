"""The broker and the database restarted under a running cluster: no book is lost, none is done twice.

Each test starts PRIVATE servers of its own (never the shared ones) on free ports in temp folders:
a Redis with append-only persistence (as docker-compose runs it) or a PostgreSQL cluster, and stops
them, and every worker it started, in `finally`. Workers are real `tts-jobs worker` subprocesses on
TINY SYNTHETIC weights (noise, never speech).

Each finished book is checked as a user would: job done, every sentence done exactly once (one WAV
per sentence), no temporary files left, the M4B's chapter marks and its duration.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import cluster_env, wipe_tables
from tests.e2e_helpers import cli, popen_worker, read_log, wait_for_final_state
from tests.soak import book_problems, stop_worker, stuck_rows

pytestmark = pytest.mark.slow

CHAPTERS = [("One", ["The first chapter has two sentences.", "Here is the second one."]),
            ("Two", ["The second chapter is short."]),
            ("Three", ["And the third chapter ends the book."])]
TITLES = [title for title, _ in CHAPTERS]


# ---------------------------------------------------------------- private servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.5) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class PrivateRedis:
    """`redis-server` with the append-only file on, as docker-compose runs it, in a folder of ours."""

    def __init__(self, directory: Path) -> None:
        self.dir, self.port = directory, free_port()
        self.process: subprocess.Popen | None = None  # type: ignore[type-arg]

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        log = open(self.dir / "redis.log", "a")  # noqa: SIM115 - the server owns it until it exits
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction",
             "--daemonize", "no"], stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._pings, 30, f"Redis on port {self.port}")

    def _pings(self) -> bool:
        import redis

        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def shutdown(self) -> None:
        """SHUTDOWN (Redis writes its append-only file and exits), then wait for the process."""
        import redis

        assert self.process is not None
        try:
            self.client().shutdown()
        except redis.ConnectionError:
            pass  # the server closes the connection as it goes
        self.process.wait(timeout=60)

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


class PrivatePostgres:
    """A PostgreSQL cluster of our own (initdb in a temp folder), trust auth on 127.0.0.1 only."""

    def __init__(self) -> None:
        bindir = Path(os.environ.get("TTS_JOBS_TEST_PG_BINDIR", "/usr/lib/postgresql/15/bin"))
        if not (bindir / "initdb").exists():
            candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
            if not candidates:
                pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
            bindir = candidates[-1].parent
        self.bindir, self.port = bindir, free_port()
        # Not under pytest's tmp_path: the postgres user must be able to reach it.
        self.root = Path(tempfile.mkdtemp(prefix="tts-jobs-pg-"))
        self.data = self.root / "pg"
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(self.root, "postgres", "postgres")
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        self._run(["initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"], 180)

    def _run(self, args: list[str], timeout: float) -> None:
        result = subprocess.run(self.as_postgres + [str(self.bindir / args[0])] + args[1:],
                                check=False, capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"{args[0]} failed: {result.stdout}\n{result.stderr}"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self._run(["pg_ctl", "-D", str(self.data), "-l", str(self.root / "postgres.log"), "-w", "-t", "120",
                   "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1", "start"], 180)

    def stop(self, mode: str = "fast") -> None:
        self._run(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop"], 180)

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture()
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    directory = tmp_path / "redis"
    directory.mkdir()
    server = PrivateRedis(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def private_postgres() -> Iterator[PrivatePostgres]:
    if shutil.which("runuser") is None and os.geteuid() == 0:
        pytest.skip("runuser is needed to run initdb as the postgres user")
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture()
def redis_cluster_env(tmp_path: Path, pg_database: str, private_redis: PrivateRedis, settings_factory):  # type: ignore[no-untyped-def]
    """The shared test PostgreSQL (schema by `tts-jobs db upgrade`, emptied) and the private Redis."""
    settings = settings_factory(pg_database, broker_url=private_redis.url(0))
    env = cluster_env(settings)
    wipe_tables(pg_database)
    try:
        yield settings, env
    finally:
        wipe_tables(pg_database)


# ---------------------------------------------------------------- helpers


def batch_states(database_url: str) -> list[tuple[int, str]]:
    from sqlalchemy import select

    from storage.db import make_engine
    from storage.models import Batch

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return [(b, s) for b, s in conn.execute(select(Batch.id, Batch.state).order_by(Batch.id))]
    finally:
        engine.dispose()


def a_batch_is_running(database_url: str) -> list[int]:
    return [b for b, state in batch_states(database_url) if state == "running"]


def submit(env: dict[str, str], book: Path) -> int:
    submitted = cli(["submit", str(book)], env)
    assert submitted.returncode == 0, submitted.stderr
    return int(submitted.stdout.strip())


def assert_finished_exactly_once(status: dict, settings, log: str) -> None:  # type: ignore[type-arg]
    problems = book_problems(status, settings.data_dir, TITLES)
    assert not problems, "\n".join(problems) + f"\n--- worker log (end)\n{log[-6000:]}"
    assert not stuck_rows(settings.database_url), stuck_rows(settings.database_url)


# ---------------------------------------------------------------- Redis

# How long Redis stays down after a batch's results are committed: longer than Celery's default
# publish retries (about 1.2 s), as short as a restart of a busy server.
OUTAGE_AFTER_COMMIT = 5.0
HOLD_RUNNING_SECONDS = 4.0  # a claimed batch's hold: longer than one look at the database and the shutdown


@pytest.mark.timeout(540)
def test_queued_work_survives_a_redis_restart(tmp_path: Path, private_redis: PrivateRedis,
                                              redis_cluster_env) -> None:  # type: ignore[no-untyped-def]
    """A book submitted while no worker runs is still there after Redis restarts (append-only file)."""
    settings, env = redis_cluster_env
    job = submit(env, write_epub(tmp_path / "book.epub", "Queued Book", CHAPTERS))
    assert private_redis.client().llen("cpu") == 1  # the ingest message waits in the queue

    private_redis.restart()  # SHUTDOWN, then a new server on the same folder and port

    assert private_redis.client().llen("cpu") == 1, "the queued message did not survive the restart"
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        status = wait_for_final_state(env, job, timeout=420)
    finally:
        stop_worker(worker)
    assert_finished_exactly_once(status, settings, read_log(tmp_path / "worker.log"))


@pytest.mark.timeout(540)
def test_a_worker_reconnects_after_redis_restarts_mid_batch(tmp_path: Path, private_redis: PrivateRedis,
                                                           redis_cluster_env) -> None:  # type: ignore[no-untyped-def]
    """Redis restarts while the worker synthesises: it reconnects, and the book completes once."""
    settings, env = redis_cluster_env
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        job = submit(env, write_epub(tmp_path / "book.epub", "Restart Book", CHAPTERS))
        wait_until(lambda: a_batch_is_running(settings.database_url), 300, "a running batch")

        private_redis.restart()

        status = wait_for_final_state(env, job, timeout=300)
        assert worker.poll() is None, "the worker exited when Redis restarted"
    finally:
        stop_worker(worker)
    assert_finished_exactly_once(status, settings, read_log(tmp_path / "worker.log"))


@pytest.mark.timeout(540)
def test_a_book_completes_when_redis_is_down_as_its_batch_finishes(
        tmp_path: Path, private_redis: PrivateRedis, redis_cluster_env) -> None:  # type: ignore[no-untyped-def]
    """Redis goes down mid-batch and comes back only after the batch's results are recorded.

    The worker must still hand the finished chapter audio to assembly: the message that continues the
    job is sent after the database commit, while the broker is unreachable.
    """
    settings, env = redis_cluster_env
    # each claimed batch is held a while before it is spoken, so that the test sees it running (the
    # book's few sentences are otherwise spoken between two looks at the database)
    worker = popen_worker({**env, "TTS_JOBS_FAULT_PAUSE": f"synthesize:{HOLD_RUNNING_SECONDS}"},
                          tmp_path / "worker.log")
    try:
        job = submit(env, write_epub(tmp_path / "book.epub", "Outage Book", CHAPTERS))
        # a stream may hold its next batch beside the first: follow the first one
        batch = min(wait_until(lambda: a_batch_is_running(settings.database_url), 300, "a running batch"))

        private_redis.shutdown()
        try:
            wait_until(lambda: (batch, "done") in batch_states(settings.database_url), 300,
                       f"batch {batch} to be recorded while Redis is down")
            time.sleep(OUTAGE_AFTER_COMMIT)  # the fault's length, not a wait for a condition
        finally:
            private_redis.start()

        status = wait_for_final_state(env, job, timeout=150)
    finally:
        stop_worker(worker)
    assert_finished_exactly_once(status, settings, read_log(tmp_path / "worker.log"))


# ---------------------------------------------------------------- PostgreSQL

LEASE_SECONDS = 120.0  # the production default: recovery must not wait for the lease to expire
AFTER_RESTART_SECONDS = 100.0  # less than the lease
# Celery's log line for a task retried after an exception (normally the batch: recording its results).
TASK_RETRIED = re.compile(r"Task tts_jobs\.\w+\[[^\]]+\] retry: Retry in")


@pytest.mark.timeout(600)
def test_a_book_completes_when_postgres_restarts_mid_batch(
        tmp_path: Path, private_postgres: PrivatePostgres, redis_url: str, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL goes down while a batch runs and returns after the worker's task has failed on it.

    The task retries with backoff; the retry (not the lease sweeper, minutes later) finishes the batch.
    """
    database_url = private_postgres.create_database("tts_jobs")
    settings = settings_factory(database_url, broker_url=redis_url, lease_seconds=LEASE_SECONDS)
    env = cluster_env(settings)
    log_path = tmp_path / "worker.log"
    worker = popen_worker(env, log_path)
    try:
        job = submit(env, write_epub(tmp_path / "book.epub", "Database Book", CHAPTERS))
        wait_until(lambda: a_batch_is_running(database_url), 300, "a running batch")

        private_postgres.stop("fast")
        try:
            wait_until(lambda: TASK_RETRIED.search(read_log(log_path)), 300,
                       "a task to fail on the database and be retried")
        finally:
            private_postgres.start()
        back = time.monotonic()

        status = wait_for_final_state(env, job, timeout=AFTER_RESTART_SECONDS)
        took = time.monotonic() - back
        assert worker.poll() is None, "the worker exited when PostgreSQL restarted"
    finally:
        stop_worker(worker)
    log = read_log(log_path)
    assert_finished_exactly_once(status, settings, log)
    assert took < LEASE_SECONDS, took

"""Private servers for the restart tests (tests/test_reliability_redis.py, _postgres.py): each
test starts a Redis with append-only persistence (as docker-compose runs it) or a PostgreSQL cluster
of its own, on a free port in a temp folder, never the shared ones; and the checks of a finished
book those tests share."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import cluster_env, wipe_tables
from tests.e2e_helpers import cli
from tests.soak import book_problems, stuck_rows

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


HOLD_RUNNING_SECONDS = 4.0  # a claimed batch's hold: longer than one look at the database and a fault


def holding_batches(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a worker that holds each claimed batch ``HOLD_RUNNING_SECONDS`` before it is
    spoken, so that a test sees it running (a book of a few sentences is otherwise spoken between
    two looks at the database) and can bring a server down under it."""
    return {**env, "TTS_JOBS_FAULT_PAUSE": f"synthesize:{HOLD_RUNNING_SECONDS}"}


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


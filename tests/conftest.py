"""Shared fixtures: tiny synthetic ChatTTS weights, databases (SQLite and the real PostgreSQL), Redis.

PostgreSQL and Redis are the real servers on 127.0.0.1 (``scripts/test`` starts them when needed).
Each test process gets its own PostgreSQL database and Redis database number, wiped around tests:
`scripts/test` runs three processes (pytest-xdist), each with its own, so that they never share a
queue or a job table. A module's tests run in one process, in order (``--dist loadfile``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# One compute thread per process, this one and every worker or `run` it starts (they inherit the
# environment): the suite runs three test processes on two cores, each starting model processes,
# and torch's default of a thread per core, OpenMP threads spinning while they wait, made every
# such test two to four times slower than alone. Set before torch is first imported.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

from jobs.leases import process_alive  # noqa: E402 - after the thread settings

PG_ADMIN_URL = os.environ.get("TTS_JOBS_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_SERVER = os.environ.get("TTS_JOBS_TEST_REDIS_SERVER", "redis://127.0.0.1:6379")
_SESSION_LOCK_KEY = "tts-jobs-test-session"


def _claim_redis_database() -> str:
    """A Redis database (1-15) that no other test session on this machine is using.

    Two sessions sharing a database would share queues: one session's workers would take (and
    acknowledge) the other's messages. The claim is a key set with NX, refreshed after flushes.
    """
    import redis

    for db in range(1, 16):
        client = redis.Redis.from_url(f"{REDIS_SERVER}/{db}")
        owner = client.get(_SESSION_LOCK_KEY)
        if owner is None and client.set(_SESSION_LOCK_KEY, os.getpid(), nx=True, ex=6 * 3600):
            return f"{REDIS_SERVER}/{db}"
        if owner is not None and not process_alive(int(owner)):
            client.set(_SESSION_LOCK_KEY, os.getpid(), ex=6 * 3600)
            return f"{REDIS_SERVER}/{db}"
    raise RuntimeError("every Redis database 1-15 is claimed by a live test session")


REDIS_TEST_URL = os.environ.get("TTS_JOBS_TEST_REDIS") or _claim_redis_database()


# The modules that take longest, longest first (measured with `--durations=0`, one module alone).
# `scripts/test` hands out whole modules in collection order (--dist loadfile --no-loadscope-reorder):
# these start at once, one per process, and the short modules fill in around them. Left to xdist's
# own order (most tests first), a long module of few tests started last and set the wall time.
LONGEST_FIRST = (
    "tests/test_resume.py",
    "tests/test_run_commands.py",
    "tests/test_soak.py",
    "tests/test_reliability.py",
    "tests/test_reliability_redis.py",
    "tests/test_reliability_postgres.py",
    "tests/test_reliability_stages.py",
    "tests/test_cluster.py",
    "tests/test_bulk.py",
    "tests/test_readalong_run.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect the longest modules first (a stable sort: every module's own order is kept)."""
    rank = {module: place for place, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ChatTTS weights in upstream layout with random values and tiny widths (noise, not speech)."""
    from pipeline.engine.weights import write_synthetic_weights

    return write_synthetic_weights(tmp_path_factory.mktemp("tiny-model"), size="tiny", seed=0).root


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session; dropped at the end."""
    import psycopg

    admin = PG_ADMIN_URL.replace("postgresql://", "postgresql://", 1)
    name = f"tts_jobs_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each database test runs on both backends, against a schema migrated to head and empty."""
    from storage.db import upgrade

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
        upgrade(url)
        yield url
        return
    url = request.getfixturevalue("pg_database")
    upgrade(url)
    yield url
    wipe_tables(url)


def wipe_tables(database_url: str) -> None:
    """Empty every table (the schema stays), so the next test starts from nothing."""
    from storage.db import make_engine
    from storage.models import Base

    engine = make_engine(database_url)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    engine.dispose()


@pytest.fixture()
def redis_url() -> Iterator[str]:
    """A Redis database number reserved for tests, flushed before and after."""
    import redis

    client = redis.Redis.from_url(REDIS_TEST_URL)
    client.flushdb()
    client.set(_SESSION_LOCK_KEY, os.getpid(), ex=6 * 3600)
    yield REDIS_TEST_URL
    client.flushdb()
    client.set(_SESSION_LOCK_KEY, os.getpid(), ex=6 * 3600)


@pytest.fixture()
def settings_factory(tmp_path: Path, tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    """Settings for a test: a private data dir, tiny weights on CPU, and the given database."""
    from jobs.settings import Settings

    def make(database_url: str | None = None, **overrides: object) -> Settings:
        data_dir = tmp_path / "data"
        base = Settings.from_env({
            "TTS_JOBS_DATA_DIR": str(data_dir),
            "TTS_JOBS_DATABASE_URL": database_url or f"sqlite:///{data_dir / 'tts-jobs.db'}",
            "TTS_JOBS_BROKER_URL": REDIS_TEST_URL,
            "TTS_JOBS_MODEL_DIR": str(tiny_model_dir),
            "TTS_JOBS_DEVICE": "cpu",
            "TTS_JOBS_PRECISION": "fp32",
        })
        return base.with_overrides(**overrides)

    return make


@pytest.fixture()
def rt(settings_factory):  # type: ignore[no-untyped-def]
    """A runtime on the test's SQLite settings (a module with its own ``rt`` fixture overrides it)."""
    from jobs.runtime import open_runtime

    return open_runtime(settings_factory())


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    """The real engine on the tiny synthetic weights, on CPU in fp32, loaded once per module."""
    from pipeline.engine import EngineConfig, load_engine

    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


def env_for(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Environment variables that make a subprocess (CLI, worker) use ``settings``."""
    env = dict(os.environ)
    env.update({
        "TTS_JOBS_DATA_DIR": str(settings.data_dir),
        "TTS_JOBS_DATABASE_URL": settings.database_url,
        "TTS_JOBS_BROKER_URL": settings.broker_url,
        "TTS_JOBS_MODEL_DIR": str(settings.model_dir),
        "TTS_JOBS_DEVICE": settings.device,
        "TTS_JOBS_PRECISION": settings.precision,
        "TTS_JOBS_LEASE_SECONDS": str(settings.lease_seconds),
        "PYTHONUNBUFFERED": "1",
    })
    return env


def cluster_env(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The environment of a cluster deployment for ``settings``, schema made by `tts-jobs db upgrade`."""
    from tests.e2e_helpers import cli

    env = env_for(settings)
    upgraded = cli(["db", "upgrade"], env, timeout=180)
    assert upgraded.returncode == 0, upgraded.stderr
    return env

"""PostgreSQL stopped under a running worker and started again: the task that failed on it is
retried and finishes the book, once, sooner than a lease would (tests/private_servers.py has the
server and the checks of the finished book)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import cluster_env
from tests.e2e_helpers import popen_worker, read_log, wait_for_final_state
from tests.private_servers import (
    CHAPTERS,
    PrivatePostgres,
    a_batch_is_running,
    assert_finished_exactly_once,
    holding_batches,
    private_postgres,
    submit,
    wait_until,
)
from tests.soak import stop_worker

__all__ = ["private_postgres"]  # a fixture, found by pytest here

pytestmark = pytest.mark.slow

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
    worker = popen_worker(holding_batches(env), log_path)
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

"""Redis restarted or down under a running cluster: no book is lost, none is done twice.

Workers are real `tts-jobs worker` subprocesses on TINY SYNTHETIC weights (noise, never speech), on
private servers (tests/private_servers.py) stopped, with every worker, in `finally`. Each finished
book is checked as a user would: job done, every sentence done exactly once (one WAV per sentence),
no temporary files left, the M4B's chapter marks and its duration.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.e2e_helpers import popen_worker, read_log, wait_for_final_state
from tests.private_servers import (
    CHAPTERS,
    PrivateRedis,
    a_batch_is_running,
    assert_finished_exactly_once,
    batch_states,
    holding_batches,
    private_redis,
    redis_cluster_env,
    submit,
    wait_until,
)
from tests.soak import stop_worker

__all__ = ["private_redis", "redis_cluster_env"]  # fixtures, found by pytest here

pytestmark = pytest.mark.slow

# How long Redis stays down after a batch's results are committed: longer than Celery's default
# publish retries (about 1.2 s), as short as a restart of a busy server.
OUTAGE_AFTER_COMMIT = 5.0


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
    worker = popen_worker(holding_batches(env), tmp_path / "worker.log")
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
    worker = popen_worker(holding_batches(env), tmp_path / "worker.log")
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



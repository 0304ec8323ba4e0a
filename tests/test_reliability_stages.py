"""Every stage leased and reconciled: a worker killed in any stage, a kill between any commit and
its message, two deliveries of one assembly, malformed queue entries, a killed book's place in the
queue. The default settings (visibility timeout 6 h) but a lease of 20 s, which paces the sweeps:
every 5 s, a missing message resent after 5 s (30 s and 30 s at the default) — the same paths,
sooner. A whole worker killed while it speaks runs at the production lease of 120 s.

Real processes: `tts-jobs worker` subprocesses (their whole process group killed like a crashed
host), the real PostgreSQL and Redis, tiny synthetic weights (noise, never speech).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobs.faults import FAULT_ENV, PAUSE_ENV
from jobs.runtime import Runtime, open_runtime
from storage import repo
from storage.models import Batch, BatchState, JobState, Sentence
from tests.books import write_epub
from tests.conftest import cluster_env, wipe_tables
from tests.e2e_helpers import TTS_JOBS, cli, popen_worker, read_log, terminate, wait_for_final_state
from tests.test_reliability import LONG_CHAPTERS, _assert_complete_and_clean, _running_batch, _submit

pytestmark = pytest.mark.slow

SHORT_CHAPTERS = [("One", ["A first short chapter."]), ("Two", ["A second short chapter, and the end."])]
RECOVERY_SECONDS = 300  # the book is done within five minutes of a new worker starting


SHORT_LEASE_SECONDS = 20.0


@pytest.fixture()
def cluster(request: pytest.FixtureRequest, pg_database: str, redis_url: str, settings_factory):  # type: ignore[no-untyped-def]
    """The real PostgreSQL and Redis with every reliability setting at its default, the lease
    short unless the test is marked ``default_settings``."""
    at_defaults = request.node.get_closest_marker("default_settings") is not None
    settings = settings_factory(pg_database, max_batch=6,
                                **({} if at_defaults else {"lease_seconds": SHORT_LEASE_SECONDS}))
    env = cluster_env(settings)
    env["TTS_JOBS_MAX_BATCH"] = "6"
    assert settings.lease_seconds == (120 if at_defaults else SHORT_LEASE_SECONDS)
    assert settings.visibility_timeout == 21_600
    yield settings, env
    wipe_tables(pg_database)


def _wait_for(condition, what: str, timeout: float = 240):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _kill_worker(worker: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """The whole worker, parent and children, at once: a crashed host."""
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


def _finished_at(rt: Runtime, job_id: int):  # type: ignore[no-untyped-def]
    with rt.session() as s:
        return repo.get_job(s, job_id).finished_at


@pytest.mark.parametrize("stage", ["ingest", "plan", pytest.param("synthesize", marks=pytest.mark.default_settings),
                                   "assemble"])
def test_a_whole_worker_killed_in_any_stage_leaves_a_book_that_finishes_once(tmp_path: Path, cluster,  # type: ignore[no-untyped-def]
                                                                             stage: str) -> None:
    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    held = {**env, PAUSE_ENV: f"{stage}:600"} if stage != "synthesize" else env
    victim = popen_worker(held, tmp_path / "victim.log")
    rescuer = None
    try:
        job = _submit(env, write_epub(tmp_path / "book.epub", "Killed Mid-Stage", LONG_CHAPTERS))
        if stage == "synthesize":
            _running_batch(rt)
        else:
            _wait_for(lambda: f"holding {stage}" in read_log(tmp_path / "victim.log"), f"the {stage} stage")
        _kill_worker(victim)
        began = time.monotonic()
        rescuer = popen_worker(env, tmp_path / "rescuer.log")
        status = wait_for_final_state(env, job, timeout=RECOVERY_SECONDS + 60)
        took = time.monotonic() - began
    finally:
        terminate(victim)
        if rescuer is not None:
            terminate(rescuer)
    assert took < RECOVERY_SECONDS, read_log(tmp_path / "rescuer.log")[-3000:]
    _assert_complete_and_clean(settings, status)
    with rt.session() as s:  # not doubled: every sentence recorded once, no batch left open
        assert not s.query(Batch).filter(Batch.state == BatchState.RUNNING.value).count()
        assert s.query(Sentence).filter(Sentence.job_id == job).count() == status["sentences_total"]


def test_a_kill_after_each_commit_that_a_message_follows_strands_nothing(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """The worker's processes die once right after the ingest, plan and record commits (and the
    sweeper's mark); `submit` and `retry` die right after theirs. Every book still finishes."""
    from jobs.choices.options import JobOptions
    from jobs.lifecycle import fail_job
    from jobs.submit import submit_book

    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    worker = popen_worker({**env, FAULT_ENV: "ingest,plan,record,reconcile"}, tmp_path / "worker.log")
    try:
        first = _submit(env, write_epub(tmp_path / "first.epub", "Commit Then Die", SHORT_CHAPTERS))
        book = write_epub(tmp_path / "second.epub", "Submitted Then Died", SHORT_CHAPTERS)
        died = cli(["submit", str(book)], {**env, FAULT_ENV: "submit"})
        assert died.returncode == -signal.SIGKILL
        failed = submit_book(rt, write_epub(tmp_path / "third.epub", "Retried Then Died", SHORT_CHAPTERS),
                             JobOptions())
        fail_job(rt, failed, "disk full")
        retried = cli(["retry", str(failed)], {**env, FAULT_ENV: "retry"})
        assert retried.returncode == -signal.SIGKILL
        statuses = [wait_for_final_state(env, job, timeout=RECOVERY_SECONDS) for job in (first, first + 1, failed)]
    finally:
        terminate(worker)
    fired = sorted(p.name for p in settings.data_dir.glob(".fault-*-done"))
    assert {".fault-ingest-done", ".fault-plan-done", ".fault-record-done", ".fault-submit-done",
            ".fault-retry-done"} <= set(fired), fired
    for status in statuses:
        _assert_complete_and_clean(settings, status)


def test_two_deliveries_of_one_assembly_assemble_once(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    from jobs.cluster.celery_app import make_celery

    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    log = tmp_path / "worker.log"
    slow = {**env, PAUSE_ENV: "assemble:6"}
    worker = subprocess.Popen(TTS_JOBS + ["worker", "--concurrency", "2"], env=slow, cwd=Path(__file__).parents[1],
                              stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115
    try:
        job = _submit(env, write_epub(tmp_path / "book.epub", "Assembled Once", SHORT_CHAPTERS))
        _wait_for(lambda: "holding assemble" in read_log(log), "the assembly")
        make_celery(settings).send_task("tts_jobs.assemble_job", (job,))  # a second delivery, meanwhile
        status = wait_for_final_state(env, job, timeout=180)
    finally:
        terminate(worker)
    assert f"job={job}: " in read_log(log) and "is assembling it; nothing to do" in read_log(log)
    assert read_log(log).count("holding assemble") == 1
    _assert_complete_and_clean(settings, status)
    assert _finished_at(rt, job) is not None


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_a_worker_survives_malformed_messages_and_serves_the_next_book(tmp_path: Path, cluster,  # type: ignore[no-untyped-def]
                                                                       busy: bool) -> None:
    import redis

    from jobs.cluster.celery_app import make_celery

    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    worker = popen_worker(env, tmp_path / "worker.log")
    client, celery = redis.Redis.from_url(settings.broker_url), make_celery(settings)
    try:
        jobs = [_submit(env, write_epub(tmp_path / "long.epub", "Busy Meanwhile", LONG_CHAPTERS))] if busy else []
        if busy:
            _running_batch(rt)
        for queue in ("cpu", "synth"):
            client.lpush(queue, "not json")
            client.lpush(queue, "[1, 2, 3]")
        celery.send_task("tts_jobs.ingest_job", ("abc",))
        celery.send_task("tts_jobs.synthesize_batch", ({"id": 1},))
        celery.send_task("tts_jobs.assemble_job", (None,))
        jobs.append(_submit(env, write_epub(tmp_path / "next.epub", "The Next Book", SHORT_CHAPTERS)))
        statuses = [wait_for_final_state(env, job, timeout=300) for job in jobs]
        assert worker.poll() is None, "the worker stopped"
    finally:
        terminate(worker)
    log = read_log(tmp_path / "worker.log")
    assert log.count("dropped a malformed entry") == 4 and "Unrecoverable error" not in log
    assert "is 'abc', not an id" in log and "is None, not an id" in log
    for status in statuses:
        _assert_complete_and_clean(settings, status)


@pytest.mark.parametrize("kill", ["child", "whole worker"])
def test_a_killed_book_keeps_its_place(tmp_path: Path, cluster, kill: str) -> None:  # type: ignore[no-untyped-def]
    """Same priority, submitted in order: after a SIGKILL mid-stream — of the worker's pool child,
    or of the whole worker, a new one started — the first book still finishes first (its batches
    go back to the queue in their place and stream again, not one at a time behind the second)."""
    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        first = _submit(env, write_epub(tmp_path / "first.epub", "Killed First", LONG_CHAPTERS))
        second = _submit(env, write_epub(tmp_path / "second.epub", "Submitted Second", LONG_CHAPTERS))
        _, holder = _running_batch(rt)
        if kill == "child":
            os.kill(int(holder.rpartition(":")[2]), signal.SIGKILL)
        else:
            _kill_worker(worker)
            worker = popen_worker(env, tmp_path / "worker-2.log")
        statuses = [wait_for_final_state(env, job, timeout=400) for job in (first, second)]
    finally:
        terminate(worker)
    for status in statuses:
        _assert_complete_and_clean(settings, status)
    assert _finished_at(rt, first) < _finished_at(rt, second)
    with rt.session() as s:
        assert repo.get_job(s, first).job_state == JobState.DONE

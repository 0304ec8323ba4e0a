"""Faults a nightly run must survive, with real worker processes, Redis and PostgreSQL.

Each test injects one fault and checks what a user would see: the book finishes exactly once, in
full, and nothing half-written looks finished. docs/reliability.md describes each mechanism.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from pathlib import Path

import pytest

from jobs.assemble import assemble_job
from jobs.batches.speak import synthesize_batch
from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage.models import Batch, BatchState
from tests.books import write_epub
from tests.conftest import cluster_env, wipe_tables
from tests.e2e_helpers import (
    assert_duration_matches_sentences_plus_pauses,
    cli,
    popen_worker,
    read_log,
    terminate,
    wait_for_final_state,
)
from tests.private_servers import holding_batches

# Long enough that a batch is still running when the test strikes (tiny weights on 2 CPU cores).
LONG_CHAPTERS = [
    (f"Chapter {n}", [f"This is sentence {i} of chapter {n}, and it goes on for a little while." for i in range(6)])
    for n in range(1, 4)
]


@pytest.fixture()
def cluster(request: pytest.FixtureRequest, pg_database: str, redis_url: str, settings_factory):  # type: ignore[no-untyped-def]
    """Settings and environment on the real PostgreSQL and Redis, schema upgraded.

    Leases are short (10 s) so that abandoned work comes back quickly, unless a test marks
    ``@pytest.mark.parametrize("cluster", [LEASE], indirect=True)``.
    """
    lease = getattr(request, "param", 10.0)
    settings = settings_factory(pg_database, lease_seconds=lease, max_batch=6)
    env = cluster_env(settings)
    env["TTS_JOBS_MAX_BATCH"] = "6"
    yield settings, env
    wipe_tables(pg_database)


def _submit(env: dict[str, str], book: Path) -> int:
    result = cli(["submit", str(book)], env)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip())


def _running_batch(rt: Runtime, timeout: float = 180) -> tuple[int, str]:
    """Wait until some batch is being synthesised; return (batch id, the worker holding it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with rt.session() as s:
            batch = s.query(Batch).filter_by(state=BatchState.RUNNING.value).first()
            if batch is not None and batch.leased_by:
                return batch.id, batch.leased_by
        time.sleep(0.2)
    raise AssertionError("no batch started running")


def _assert_complete_and_clean(settings, status: dict) -> None:  # type: ignore[no-untyped-def, type-arg]
    """Every sentence spoken once, no temporary files left, the audiobook as long as its parts."""
    assert status["state"] == "done", status
    assert status["sentences_done"] == status["sentences_total"]
    audio_dir = settings.data_dir / "jobs" / str(status["id"]) / "audio"
    assert len(list(audio_dir.rglob("*.wav"))) == status["sentences_total"]
    assert list(settings.data_dir.rglob("*.part")) == []
    [output] = [Path(p) for p in status["outputs"]]
    assert_duration_matches_sentences_plus_pauses(output, status, settings.data_dir)


@pytest.mark.parametrize("cluster", [600.0], indirect=True)  # no help from lease expiry here
def test_a_worker_child_killed_mid_batch_loses_no_sentence(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL of the pool child: the message comes back at once, and the replacement child takes
    the batch over from its dead sibling without waiting for the lease to expire."""
    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    # each batch held a moment once claimed: a batch of six tiny sentences may otherwise be spoken
    # between the look that finds it running and the kill
    worker = popen_worker(holding_batches(env), tmp_path / "worker.log")
    try:
        job = _submit(env, write_epub(tmp_path / "book.epub", "Killed Child", LONG_CHAPTERS))
        batch_id, holder = _running_batch(rt)
        os.kill(int(holder.rpartition(":")[2]), signal.SIGKILL)
        status = wait_for_final_state(env, job, timeout=400)
    finally:
        terminate(worker)
    log = read_log(tmp_path / "worker.log")
    # the replacement child's first sweep returns the batch, or the redelivery takes it over
    assert holder in log and ("sending them out again" in log or "taking it over" in log), log[-3000:]
    _assert_complete_and_clean(settings, status)
    with rt.session() as s:
        assert s.get(Batch, batch_id).attempts == 2


def test_a_whole_worker_killed_hands_its_batch_to_another_worker(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """Parent and children killed (a host crash): the lease expires and a live worker takes over."""
    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    workers = [popen_worker(holding_batches(env), tmp_path / f"worker{i}.log") for i in range(2)]
    try:
        job = _submit(env, write_epub(tmp_path / "book.epub", "Crashed Host", LONG_CHAPTERS))
        _, holder = _running_batch(rt)
        victim = os.getpgid(int(holder.rpartition(":")[2]))
        os.killpg(victim, signal.SIGKILL)
        status = wait_for_final_state(env, job, timeout=400)
    finally:
        for w in workers:
            terminate(w)
    logs = "".join(read_log(tmp_path / f"worker{i}.log") for i in range(2))
    assert "went silent" in logs
    _assert_complete_and_clean(settings, status)


def test_warm_shutdown_finishes_and_records_the_running_batch(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    worker = popen_worker(env, tmp_path / "worker.log")
    job = _submit(env, write_epub(tmp_path / "book.epub", "Warm Shutdown", LONG_CHAPTERS))
    batch_id, _ = _running_batch(rt)
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=300)
    with rt.session() as s:
        assert s.get(Batch, batch_id).state == BatchState.DONE.value, read_log(tmp_path / "worker.log")[-3000:]
    restarted = popen_worker(env, tmp_path / "worker2.log")
    try:
        status = wait_for_final_state(env, job, timeout=400)
    finally:
        terminate(restarted)
    _assert_complete_and_clean(settings, status)


def test_a_pickle_message_is_refused_and_never_executed(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """A message in a content type other than JSON is dropped by the worker, never deserialised."""
    import pickle

    from kombu import Connection

    settings, env = cluster
    rt = open_runtime(settings, upgrade_schema=False)
    book = write_epub(tmp_path / "book.epub", "Untouched", LONG_CHAPTERS[:1])
    job = submit_book(rt, book, JobOptions())  # recorded, but no message sent
    with Connection(settings.broker_url) as conn:
        producer = conn.Producer(serializer="pickle")
        producer.publish(pickle.dumps(((job,), {}, {})), routing_key="cpu", exchange="",
                         content_type="application/x-python-serialize", content_encoding="binary",
                         headers={"task": "tts_jobs.ingest_job", "id": "evil-1", "argsrepr": "", "kwargsrepr": ""})
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 120
        while "refusing to deserialize" not in read_log(tmp_path / "worker.log").lower():
            assert time.monotonic() < deadline, read_log(tmp_path / "worker.log")[-3000:]
            time.sleep(0.5)
        time.sleep(2)  # had it been taken, its receipt would be logged by now
    finally:
        terminate(worker)
    log = read_log(tmp_path / "worker.log")
    # never received nor run (the sweep may send the job's own ingest meanwhile: that one is JSON)
    assert not re.search(r"Task tts_jobs\.\w+\[evil-1\] (received|succeeded|raised)", log), log[-3000:]


def test_tasks_for_unknown_or_finished_work_do_nothing(settings_factory, tiny_model_dir: Path,  # type: ignore[no-untyped-def]
                                                        database_url: str) -> None:
    from pipeline.engine import EngineConfig, load_engine

    rt = open_runtime(settings_factory(database_url), upgrade_schema=False)
    engine = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))
    assert ingest_job(rt, 999) is False
    assert plan_pending(rt) == []
    assert synthesize_batch(rt, engine, 999, "gpu0") == []
    assert assemble_job(rt, 999) == []


def test_a_full_disk_fails_the_batch_cleanly_and_keeps_what_was_recorded(settings_factory, database_url: str,  # type: ignore[no-untyped-def]
                                                                           tmp_path: Path, tiny_model_dir: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while writing sentence audio: the batch is retried, then its job fails with the reason;
    no file with a final name is incomplete and earlier audio stays recorded."""
    import pipeline.audio.wavio
    from pipeline.engine import EngineConfig, load_engine

    rt = open_runtime(settings_factory(database_url, max_attempts=2, max_batch=2), upgrade_schema=False)
    engine = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))
    job = submit_book(rt, write_epub(tmp_path / "b.epub", "Full Disk", LONG_CHAPTERS[:1]),
                              JobOptions())
    assert ingest_job(rt, job)
    first, *rest = plan_pending(rt)
    synthesize_batch(rt, engine, first, "gpu0")  # this batch's audio is recorded
    recorded = job_statuses(rt, job)[0].sentences_done
    real_write = pipeline.audio.wavio.write_sentence_wav  # what a batch's writer threads call
    written: list[Path] = []

    def write_until_full(path: Path, waveform, **options):  # type: ignore[no-untyped-def]
        if written:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(path)
        return real_write(path, waveform, **options)

    monkeypatch.setattr(pipeline.audio.wavio, "write_sentence_wav", write_until_full)
    for _ in range(3):
        with pytest.raises(OSError):
            written.clear()
            synthesize_batch(rt, engine, rest[0], "gpu0")
        if job_statuses(rt, job)[0].state == "failed":
            break
    status = job_statuses(rt, job)[0]
    assert status.state == "failed" and "No space left on device" in status.error
    assert status.sentences_done == recorded > 0
    assert list(rt.settings.data_dir.rglob("*.part")) == []
    with rt.session() as s:
        assert s.get(Batch, rest[0]).state == BatchState.FAILED.value

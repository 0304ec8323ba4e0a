"""`tts-jobs bulk` on PostgreSQL, as a shared server holds the job table: two runs that overlap
(cron fired twice, a slow night) submit each book once, the database's unique hash deciding
between them; and the whole night, a real worker converting the inbox, `--wait` leaving an
audiobook and a report per book."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.books import write_markdown
from tests.conftest import env_for
from tests.e2e_helpers import popen_worker, read_log, status_json, terminate
from tests.test_bulk import popen_bulk, run_bulk, small_book

# ---------------------------------------------------------------- overlapping runs (PostgreSQL)


@pytest.fixture()
def pg_settings(pg_database: str, settings_factory):  # type: ignore[no-untyped-def]
    """Settings on the real PostgreSQL, schema at head, tables emptied afterwards."""
    from storage.db import upgrade
    from tests.conftest import wipe_tables

    upgrade(pg_database)
    yield settings_factory(pg_database)
    wipe_tables(pg_database)


def test_two_overlapping_runs_submit_each_book_once(tmp_path: Path, pg_settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(pg_settings)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    for number in range(8):
        small_book(inbox / f"book{number}.epub", f"Book {number}")
    args = [str(inbox), "--out", str(out), "--min-age", "0", "--json"]

    runs = [popen_bulk(args, env) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]

    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    books = [b for stdout, _ in outputs for b in json.loads(stdout)["books"]]
    submitted = [b for b in books if b["outcome"] == "submitted"]
    assert sorted(Path(b["file"]).name for b in submitted) == sorted(f"book{n}.epub" for n in range(8))
    assert all(b["outcome"] == "skipped" and "submitted" in b["reason"] for b in books if b not in submitted)
    assert len(status_json(env)) == 8


def test_the_unique_hash_decides_when_a_rival_run_commits_first(tmp_path: Path, pg_settings) -> None:  # type: ignore[no-untyped-def]
    """Both runs pass the "seen before?" check; the database lets only one of them record the book."""
    from jobs import bulk
    from jobs.runtime import open_runtime
    from pipeline.files import file_sha256
    from storage.models import BulkEntry, Job

    rt = open_runtime(pg_settings)
    book = small_book(tmp_path / "rival.epub", "Rival")
    sha256 = file_sha256(book)
    rival = rt.session()
    rival_job = Job(source_name="rival.epub", source_path="", source_sha256=sha256, book_format="epub",
                    voice_name="default", voice_embedding="seed:1")
    rival.add(rival_job)
    rival.flush()
    rival.add(BulkEntry(sha256=sha256, path=str(book), job_id=rival_job.id))
    rival.flush()  # the rival holds the unique key, uncommitted

    enqueued: list[int] = []
    outcome: list[Any] = []
    options = bulk.BulkOptions(out_dir=tmp_path / "out", min_age_seconds=0)
    ours = threading.Thread(target=lambda: outcome.append(bulk.submit_one(rt, book, options,
                                                                           enqueued.append)))
    ours.start()
    try:
        _wait_until_a_session_waits_for_a_lock(pg_settings.database_url)  # our INSERT, behind the rival's key
        assert ours.is_alive()
        rival.commit()
    finally:
        rival.close()  # after a failure: rolls back, which lets our insert through
        ours.join(timeout=30)

    [result] = outcome
    assert result.outcome == bulk.Outcome.SKIPPED
    assert f"already submitted as job {rival_job.id}" in result.reason
    assert enqueued == []
    assert not (tmp_path / "out" / "Rival").exists()  # no folder claimed for a book we did not submit


# ---------------------------------------------------------------- the whole night (real worker)


@pytest.mark.slow
def test_wait_converts_the_inbox_and_leaves_an_audiobook_and_a_report_per_book(
        tmp_path: Path, pg_settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(pg_settings)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    small_book(inbox / "night.epub", "Night Reading")
    write_markdown(inbox / "notes.md", "Field Notes",
                   [("Monday", ["It rained."]), ("Tuesday", ["It did not."])])
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        result = run_bulk([str(inbox), "--out", str(out), "--min-age", "0", "--wait", "--poll", "1"], env,
                          timeout=400)
    finally:
        terminate(worker)

    assert result.returncode == 0, (result.stdout, result.stderr, read_log(tmp_path / "worker.log")[-3000:])
    assert "summary: 2 submitted, 0 skipped, 0 unreadable; 2 done, 0 failed" in result.stdout
    assert "2/2 books finished (0 failed)" in result.stderr
    for author, title, chapters in (("Test Author", "Night Reading", ["Only"]),
                                    ("Unknown Author", "Field Notes", ["Monday", "Tuesday"])):
        audiobook = out / author / title / f"{title}.m4b"
        assert audiobook.is_file(), sorted(out.rglob("*"))
        report = json.loads((out / author / title / f"{title}.report.json").read_text())
        assert report["state"] == "done" and report["outputs"] == [str(audiobook)]
        assert [c["title"] for c in report["chapters"]] == chapters
        assert report["duration_seconds"] > 0 and report["sentences"]["done"] == report["sentences"]["total"]
        assert isinstance(report["warnings"], list)


def _wait_until_a_session_waits_for_a_lock(database_url: str, timeout: float = 60) -> None:
    from sqlalchemy import text

    from storage.db import make_engine

    # A fresh connection per look: inside one transaction pg_stat_activity is a frozen snapshot.
    engine = make_engine(database_url)
    query = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND datname = current_database()")
    deadline = time.monotonic() + timeout
    try:
        while True:
            with engine.connect() as connection:
                if connection.execute(query).scalar_one() > 0:
                    return
            assert time.monotonic() < deadline, "our insert never waited for the rival's transaction"
            time.sleep(0.1)
    finally:
        engine.dispose()

"""The cluster path with real parts: PostgreSQL, Redis, a `tts-jobs worker` subprocess, tiny weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import cluster_env, wipe_tables
from tests.e2e_helpers import (
    assert_duration_matches_sentences_plus_pauses,
    cli,
    ffprobe_chapters,
    popen_worker,
    read_log,
    status_json,
    terminate,
    wait_for_final_state,
)
from tests.readalong_helpers import epubcheck

CHAPTERS = [("One", ["The first chapter has two sentences.", "Here is the second one."]),
            ("Two", ["第二章只有一句话。"]),
            ("Three", ["And the third chapter ends the book."])]


@pytest.fixture()
def cluster(pg_database: str, redis_url: str, settings_factory):  # type: ignore[no-untyped-def]
    """Settings on the real PostgreSQL (schema created by `tts-jobs db upgrade`) and Redis."""
    settings = settings_factory(pg_database)
    yield settings, cluster_env(settings)
    wipe_tables(pg_database)


def test_a_submitted_book_is_finished_by_a_worker(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    settings, env = cluster
    book = write_epub(tmp_path / "book.epub", "Cluster Book", CHAPTERS)
    worker = popen_worker(env, tmp_path / "worker.log")
    try:
        submitted = cli(["submit", str(book), "-f", "m4b,epub,srt"], env)  # read-along beside the M4B
        assert submitted.returncode == 0, submitted.stderr
        job = int(submitted.stdout.strip())
        status = wait_for_final_state(env, job)
    finally:
        terminate(worker)
    assert status["state"] == "done", (status, read_log(tmp_path / "worker.log")[-4000:])
    assert status["sentences_done"] == status["sentences_total"] >= 4
    outputs = {Path(p).suffix: Path(p) for p in status["outputs"]}
    assert sorted(outputs) == [".epub", ".m4b", ".srt"] and all(p.is_file() for p in outputs.values())
    output = outputs[".m4b"]
    problems = [m for m in epubcheck(outputs[".epub"], tmp_path) if m["severity"] in ("FATAL", "ERROR", "WARNING")]
    assert problems == []
    assert status["report"]["timings"]["sentences"] == status["sentences_total"]
    assert [c["tags"]["title"] for c in ffprobe_chapters(output)] == ["One", "Two", "Three"]
    assert_duration_matches_sentences_plus_pauses(output, status, settings.data_dir)
    [listed] = status_json(env)
    assert listed["id"] == job and listed["state"] == "done" and listed["outputs"] == status["outputs"]
    assert [c["title"] for c in status["chapters"]] == ["One", "Two", "Three"]
    assert all(c["sentences_done"] == c["sentences"] > 0 for c in status["chapters"])

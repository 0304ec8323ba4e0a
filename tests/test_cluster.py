"""The cluster path with real parts: PostgreSQL, Redis, a `tts-jobs worker` subprocess, tiny weights."""

from __future__ import annotations

import re
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


def test_a_workers_job_is_spoken_with_its_options_row_by_row(tmp_path: Path, cluster) -> None:  # type: ignore[no-untyped-def]
    """Chapters, pace, pronunciation, dialogue voice and narrator tag through `submit` and a real
    worker: each row's request (its DEBUG line) has the pace and the voice of its role, and the
    audiobook holds the chapters chosen, every sentence once, in order."""
    import json
    import re

    from sqlalchemy import create_engine, text

    settings, env = cluster
    assert cli(["voice", "new", "anna", "--seed", "7"], env).returncode == 0
    names = tmp_path / "names.txt"
    names.write_text("harpooneer = harpoon-eer\n", encoding="utf-8")
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", [
        ("Loomings", ["Call me Ishmael."]),
        ("The Carpet-Bag", ['"Come," said the landlord, "the harpooneer is here."', "I packed my old bag."]),
        ("The Spouter-Inn", ["“Landlord, where is that harpooneer?” I asked.", "No answer came."])])
    worker = popen_worker(env, tmp_path / "worker.log", loglevel="DEBUG")
    try:
        submitted = cli(["submit", str(book), "--chapters", "2-", "--speed", "7", "--dialogue-voice", "anna",
                         "--lexicon", str(names), "--narrator", "Nora Narrator"], env)
        assert submitted.returncode == 0, submitted.stderr
        status = wait_for_final_state(env, int(submitted.stdout.strip()))
    finally:
        terminate(worker)
    log = read_log(tmp_path / "worker.log")
    assert status["state"] == "done", (status, log[-4000:])
    with create_engine(settings.database_url).connect() as db:
        rows = db.execute(text("SELECT s.id, s.role, s.text, c.index AS chapter, s.index AS position "
                               "FROM sentences s JOIN chapters c ON c.id = s.chapter_id "
                               "ORDER BY c.index, s.index")).all()
    heard = {int(i): (role, voice, prompt) for i, role, voice, prompt in
             re.findall(r"sentence=(\d+) role=(\w+) voice=(\S+) prompt=(\S+)", log)}
    assert sorted(heard) == sorted(row.id for row in rows)
    assert {row.role for row in rows} == {"narrator", "dialogue"} and any("harpoon eer" in r.text for r in rows)
    for row in rows:
        voice = "seed:7" if row.role == "dialogue" else "seed:2222"  # anna's seed, the default voice's
        assert heard[row.id] == (row.role, voice, "[speed_7]"), row
    m4b = next(Path(p) for p in status["outputs"] if p.endswith(".m4b"))
    assert [c["tags"]["title"] for c in ffprobe_chapters(m4b)] == ["The Carpet-Bag", "The Spouter-Inn"]
    timings = json.loads(Path(status["report"]["timings"]["path"]).read_text())
    assert [(c["index"], s["index"], s["spoken"]) for c in timings["chapters"] for s in c["sentences"]] == \
        [(row.chapter, row.position, row.text) for row in rows]
    assert status["options"]["narrator"] == "Nora Narrator" and status["options"]["dialogue_voice"] == "anna"


def test_a_cluster_assembles_a_books_first_chapters_while_the_rest_is_spoken(  # type: ignore[no-untyped-def]
        tmp_path: Path, cluster) -> None:
    """A synthesis worker and a CPU worker, default settings: the book is spoken in
    waves of chapters, the CPU worker assembles the spoken chapters ahead while the next are
    spoken, its assembly after the last batch takes them, and the M4B has every chapter in order
    at the times the report gives."""
    settings, env = cluster
    chapters = [(f"Part {n}", [f"Sentence {n}.{k} of a book assembled ahead." for k in range(1, 4)])
                for n in range(1, 6)]
    book = write_epub(tmp_path / "ahead.epub", "Ahead", chapters)
    synthesis = popen_worker(env, tmp_path / "synth.log", "INFO", "--queues", "synth", "--name", "synth@test")
    cpu = popen_worker(env, tmp_path / "cpu.log", "INFO", "--cpu", "--name", "cpu@test")
    try:
        submitted = cli(["submit", str(book), "-f", "m4b"], env)
        assert submitted.returncode == 0, submitted.stderr
        status = wait_for_final_state(env, int(submitted.stdout.strip()))
    finally:
        terminate(synthesis)
        terminate(cpu)
    cpu_log = read_log(tmp_path / "cpu.log")
    assert status["state"] == "done", (status, cpu_log[-4000:], read_log(tmp_path / "synth.log")[-4000:])
    assert "in 5 waves of chapters" in cpu_log  # planned by the CPU worker after the ingest
    ahead = [int(n) for n in re.findall(r"stitched in [\d.]+ s \((\d) chapter\(s\) ahead\)", cpu_log)]
    assert ahead and 1 <= ahead[0] <= 4, cpu_log[-4000:]  # the last chapter is always the assembly's
    marks = ffprobe_chapters(Path(status["outputs"][0]))
    assert [m["tags"]["title"] for m in marks] == [title for title, _ in chapters]
    starts = [float(m["start_time"]) for m in marks]
    assert starts == pytest.approx([c["start_seconds"] for c in status["report"]["chapters"]], abs=0.05)
    assert_duration_matches_sentences_plus_pauses(Path(status["outputs"][0]), status, settings.data_dir)
    assert list(settings.data_dir.rglob("prepared.pickle")) == []  # the work directory went with the assembly

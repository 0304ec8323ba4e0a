"""Never lose work on the embedded path: a `tts-jobs run` stopped by Ctrl-C, SIGTERM or SIGKILL is
resumed by the same command, speaking only what was not recorded, into the same audiobook.

Real processes: the `tts-jobs run` command in a subprocess, the tiny ChatTTS weights on CPU, the
SQLite default, real ffmpeg.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import (
    TTS_JOBS,
    cli,
    ffprobe_chapters,
    ffprobe_seconds,
    killed_mid_write,
    popen_stoppable,
    status_json,
)

ROOT = Path(__file__).resolve().parent.parent
# 36 sentences: the first CPU batch of 16 is recorded before the signal, and more than a batch is left
CHAPTERS = [(f"Chapter {c}", [f"In chapter {c}, paragraph line {i} is read aloud by the narrator, slowly."
                              for i in range(12)]) for c in ("One", "Two", "Three")]
SPOKEN_BEFORE_THE_SIGNAL = 16  # one CPU batch recorded: work that must never be redone


def _spoken(database: Path) -> dict[int, float]:
    """Recorded sentences: id -> the modification time of their WAV."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, audio_path FROM sentences WHERE state = 'done'").fetchall()
    data_dir = database.parent
    return {sentence: (data_dir / path).stat().st_mtime_ns for sentence, path in rows}


def _wait_until_spoken(database: Path, count: int, process: subprocess.Popen, timeout: float = 240) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be stopped"
        if database.exists():
            try:
                if len(_spoken(database)) >= count:
                    return
            except sqlite3.OperationalError:  # schema being made, or the writer holds the lock
                pass
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} sentences spoken after {timeout} s")


def _sentences_spoken_in(log: str) -> int:
    """The sentences a run synthesized, from its "batch=N: K sentences" lines."""
    return sum(int(n) for n in re.findall(r"batch=\d+: (\d+) sentences", log))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict:  # type: ignore[type-arg]
    """The same book run once without interruption, in a data directory of its own."""
    from jobs.settings import Settings

    folder = tmp_path_factory.mktemp("uninterrupted")
    settings = Settings.from_env({"TTS_JOBS_DATA_DIR": str(folder / "data"), "TTS_JOBS_MODEL_DIR": str(tiny_model_dir),
                                  "TTS_JOBS_DEVICE": "cpu", "TTS_JOBS_PRECISION": "fp32"})
    env = env_for(settings)
    book = write_epub(folder / "long.epub", "The Long Night", CHAPTERS)
    result = cli(["run", str(book), "--out", str(folder / "out")], env)
    assert result.returncode == 0, result.stderr
    output = Path(result.stdout.strip().splitlines()[-1])
    return {"book": book, "output": output, "chapters": ffprobe_chapters(output), "seconds": ffprobe_seconds(output)}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_stopped_run_resumes_without_speaking_anything_twice(tmp_path: Path, settings_factory, reference,  # type: ignore[no-untyped-def]
                                                               stop: signal.Signals) -> None:
    settings = settings_factory()
    env = env_for(settings)
    env.pop("TTS_JOBS_BROKER_URL")  # the embedded path needs no broker
    database = settings.data_dir / "tts-jobs.db"
    command = TTS_JOBS + ["run", str(reference["book"]), "--out", str(tmp_path / "out")]
    process = popen_stoppable(command, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_until_spoken(database, SPOKEN_BEFORE_THE_SIGNAL, process)

    process.send_signal(stop)
    began = time.monotonic()
    _, first_log = process.communicate(timeout=30)
    stopped_after = time.monotonic() - began

    assert stopped_after < 10
    assert "Traceback" not in first_log
    if stop != signal.SIGKILL:
        assert process.returncode == 130
        assert "resume it with the same command, or `tts-jobs retry 1`" in first_log
    [job] = status_json(env)  # a killed run is recognised by the next look
    assert job["state"] == "interrupted", job
    assert job["x_realtime"] is None and job["eta_seconds"] is None
    assert job["resume"] == "tts-jobs retry 1"
    kept = _spoken(database)
    assert SPOKEN_BEFORE_THE_SIGNAL <= len(kept) < job["sentences_total"]
    killed_mid_write(settings.data_dir / "jobs" / "1" / "audio" / "c0003" / "s00015.wav")  # as SIGKILL can

    resumed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at plan" in resumed.stderr
    assert _sentences_spoken_in(resumed.stderr) == job["sentences_total"] - len(kept)
    after = _spoken(database)
    assert {s: after[s] for s in kept} == kept  # not one recorded sentence was written again
    [done] = status_json(env)
    assert done["id"] == 1 and done["state"] == "done"
    output = Path(resumed.stdout.strip().splitlines()[-1])
    assert [c["tags"]["title"] for c in ffprobe_chapters(output)] == \
        [c["tags"]["title"] for c in reference["chapters"]]
    tolerance = 0.005 * reference["seconds"]  # the same sentences, seeds and pauses
    starts = [float(c["start_time"]) for c in ffprobe_chapters(output)]
    assert all(abs(a - float(b["start_time"])) <= tolerance for a, b in zip(starts, reference["chapters"]))
    assert abs(ffprobe_seconds(output) - reference["seconds"]) <= tolerance
    assert not [p for folder in (settings.data_dir, tmp_path / "out") for pattern in (".*.tmp", ".*.part*")
                for p in folder.rglob(pattern)]  # the resumed run removed what the stopped one was writing


def test_retry_resumes_an_interrupted_run_here_and_never_asks_a_broker(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    settings = settings_factory()
    env = {**env_for(settings), "TTS_JOBS_BROKER_URL": "redis://127.0.0.1:1/0"}  # nothing listens there
    book = write_epub(tmp_path / "book.epub", "A Short Night", CHAPTERS[:2])
    process = popen_stoppable(TTS_JOBS + ["run", str(book), "--out", str(tmp_path / "out")], env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_until_spoken(settings.data_dir / "tts-jobs.db", SPOKEN_BEFORE_THE_SIGNAL, process)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)

    retried = cli(["retry", "1"], env)

    assert retried.returncode == 0, retried.stderr
    assert "broker" not in retried.stderr
    [job] = status_json(env)
    assert job["state"] == "done" and Path(retried.stdout.strip().splitlines()[-1]).is_file()


def test_two_runs_of_one_book_started_together_speak_it_once(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """Started at the same instant, one `run` reads the book and the other is refused at once (exit 2),
    naming the process that reads it: one job (no second one speaking it into a folder of its own)."""
    settings = settings_factory()
    env = env_for(settings)
    book = write_epub(tmp_path / "book.epub", "A Short Night", CHAPTERS[:2])
    command = TTS_JOBS + ["run", str(book), "--out", str(tmp_path / "out")]
    runs = [popen_stoppable(command, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    try:
        refused = _first_to_end(runs, timeout=120)
        reading = next(run for run in runs if run is not refused)
        _, said = refused.communicate(timeout=30)
        assert refused.returncode == 2, said
        assert said.strip().splitlines()[-1] == (
            f"error: {book}: another `tts-jobs run` is reading this book with these choices right now "
            f"(process {os.uname().nodename}:{reading.pid}); wait for it, or stop it first")
        _wait_until_spoken(settings.data_dir / "tts-jobs.db", 1, reading)
        assert [job["id"] for job in status_json(env)] == [1]
    finally:
        for run in runs:
            if run.poll() is None:
                run.send_signal(signal.SIGINT)
                run.communicate(timeout=30)


def _first_to_end(runs: list[subprocess.Popen], timeout: float) -> subprocess.Popen:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ended = [run for run in runs if run.poll() is not None]
        if ended:
            return ended[0]
        time.sleep(0.1)
    raise AssertionError(f"neither run ended in {timeout} s: both are reading the book")

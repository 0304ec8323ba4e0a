"""Read-along from a real `tts-jobs run` (subprocess, tiny synthetic weights on CPU: noise, never
speech), stopped by Ctrl-C and resumed: the M4B, its subtitles, the read-along EPUB and the
timings, all from the one job, the timings in `status JOB --json`."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from pipeline.types import SAMPLE_RATE
from tests.conftest import env_for
from tests.e2e_helpers import TTS_JOBS, ffprobe_chapters, popen_stoppable, status_json
from tests.readalong_helpers import epubcheck
from tests.test_readalong_subtitles import check_cues, srt_cues

ROOT = Path(__file__).resolve().parent.parent


def _book(path: Path) -> Path:
    chapters = []
    for number, title in enumerate(("The First Night", "The Second Night"), start=1):
        paragraphs = [
            f"On night {number}, in {1900 + 10 * line}, the keeper lit lamp {line}. It burned till dawn."
            for line in range(1, 9)
        ]
        chapters.append(f"## {title}\n\n" + "\n\n".join(paragraphs))
    path.write_text("# The Lighthouse\n\n" + "\n\n".join(chapters) + "\n", encoding="utf-8")
    return path


def _spoken(database: Path) -> int:
    try:
        with sqlite3.connect(database) as db:
            return db.execute("SELECT count(*) FROM sentences WHERE state = 'done'").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is being made, or the writer holds the lock
        return 0


def test_a_stopped_and_resumed_run_writes_the_read_along_outputs(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    settings = settings_factory()
    env = env_for(settings)
    env.pop("TTS_JOBS_BROKER_URL")  # the embedded path needs no broker
    command = TTS_JOBS + [
        "run",
        str(_book(tmp_path / "book.md")),
        "--out",
        str(tmp_path / "out"),
        "-f",
        "m4b,epub,srt",
    ]
    # each recorded batch held a moment: the signal comes while the run still speaks, however fast
    # this machine speaks the tiny book (unheld, the run was sometimes done before it)
    held = {**env, "TTS_JOBS_FAULT_PAUSE": "recorded:1"}
    process = popen_stoppable(command, held, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while _spoken(settings.data_dir / "tts-jobs.db") == 0:
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run ended before it could be stopped"
        )
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert status_json(env, 1)["state"] == "interrupted"

    resumed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert resumed.returncode == 0, resumed.stderr
    outputs = [Path(line) for line in resumed.stdout.strip().splitlines()]
    assert sorted(p.suffix for p in outputs) == [".epub", ".m4b", ".srt"]
    status = status_json(env, 1)
    assert status["state"] == "done"
    timings_path = Path(status["report"]["timings"]["path"])
    assert status["report"]["timings"]["sentences"] == status["sentences_total"] > 0
    assert timings_path.parent == outputs[0].parent
    timings = json.loads(timings_path.read_text(encoding="utf-8"))
    assert timings["sentences"] == status["sentences_total"]
    m4b = next(p for p in outputs if p.suffix == ".m4b")
    marks = [round(float(c["start_time"]) * timings["sample_rate"]) for c in ffprobe_chapters(m4b)]
    starts = [chapter["book_start"] for chapter in timings["chapters"]]  # the marks' own arithmetic,
    assert len(marks) == len(starts)  # to the M4B chapter track's millisecond (24 samples)
    assert all(abs(mark - start) < SAMPLE_RATE // 1000 for mark, start in zip(marks, starts)), (marks, starts)
    sentences = [s for chapter in timings["chapters"] for s in chapter["sentences"]]
    assert any(s["written"]["text"].startswith("On night 1, in 1910,") for s in sentences)
    check_cues(srt_cues(next(p for p in outputs if p.suffix == ".srt")), sentences, book_time=True)
    epub = next(p for p in outputs if p.suffix == ".epub")
    assert [m for m in epubcheck(epub, tmp_path) if m["severity"] in ("FATAL", "ERROR", "WARNING")] == []
    assert sum(1 for s in sentences if "epub" in s) == len(sentences)

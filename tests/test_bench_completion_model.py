"""``python -m pipeline.bench completion-model``: a model of when a book's chapters are done in
the decode slots, planned by the real planner. One wave (the book sorted by length as a whole)
finishes every chapter in the stream's last moments; waves finish the first chapters early."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.bench.completion_model import Row, late_audio, planned, spoken_at

ROOT = Path(__file__).resolve().parents[1]


def book(chapters: int = 8, sentences: int = 1000) -> list[Row]:
    """Every chapter alike: sentences of 50 to 349 steps, one in six running to a cap twice that."""
    rows = []
    for chapter in range(chapters):
        for k in range(sentences):
            budget = 50 + (k * 37) % 300
            rows.append(Row(len(rows), chapter, 2 * budget, 2 * budget if k % 6 == 0 else budget))
    return rows


def test_one_wave_finishes_every_chapter_last_and_waves_finish_the_first_ones_early() -> None:
    rows = book()
    whole = spoken_at(planned(rows, 1))
    waves = spoken_at(planned(rows, 4))

    assert set(whole) == set(waves) == {row.id for row in rows}  # every sentence spoken, once
    scale = 20.0 / max(whole.values())  # the whole stream in 20 seconds
    end, late = late_audio(rows, whole, scale)
    total = sum(row.steps for row in rows) / 46.875 / 3600
    assert abs(late[0] - total) < 1e-9  # one wave: all of it in chapters done in its last second
    end_waves, late_waves = late_audio(rows, waves, scale)
    assert late_waves[1] < total / 3  # in four waves, most is done before the last 2 s
    first_done = max(waves[row.id] for row in rows if row.chapter_id == 0)
    last_done = max(waves[row.id] for row in rows if row.chapter_id == 7)
    assert first_done < last_done / 2


def test_the_command_prints_a_row_per_wave_count() -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "completion-model", "--hours", "0.5",
                           "--chapters", "6", "--waves", "1", "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)

    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit() and "sentences" not in line]
    assert [row[0] for row in rows] == ["1", "3"], done.stdout
    assert "a model, not a measurement" in done.stdout

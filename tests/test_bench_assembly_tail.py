"""``python -m pipeline.bench assembly-tail`` end to end on a small synthetic book: it plays the
recording back, assembles the book at the end and ahead, and prints the tail table. It measures
nothing here (no time is asserted); it must run and report a row per mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_tail_table_has_a_row_per_mode_with_the_chapters_prepared_ahead() -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "assembly-tail", "--hours", "0.03",
                           "--chapters", "4", "--waves", "4", "--rate", "50"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)

    assert done.returncode == 0, done.stderr
    rows = {line.split()[1]: line.split() for line in done.stdout.splitlines() if line.strip().startswith("50x")}
    assert set(rows) == {"end", "ahead", "ahead-serial"}, done.stdout
    assert rows["end"][4] == "0" and rows["end"][5] == "1.0x"
    assert 1 <= int(rows["ahead"][4]) <= 3  # never the last chapter
    assert "tail after the last sentence" in done.stdout

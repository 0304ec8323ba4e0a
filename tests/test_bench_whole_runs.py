"""The measurements of whole `tts-jobs` runs, in their CPU smoke modes (tiny SYNTHETIC weights: noise,
never speech; they measure nothing here): `run-book` times `tts-jobs run` of a generated EPUB, and
`workers-scaling` takes books through Celery workers and the job table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def bench(*args: str, out: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(out), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "pipeline.bench", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout, check=False)


def test_run_book_times_a_whole_run_and_says_where_its_stages_began(tmp_path: Path) -> None:
    """Two variants of the same tree taking turns, the first with a setting of its own that its
    run refuses: said in the table (and the exit status), and the other variant's run goes on."""
    done = bench("run-book", "--cpu-smoke", "--format", "wav", "--variant", "bad=.:TTS_JOBS_DEVICE=abacus",
                 "--variant", "plain=.", out=tmp_path)

    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    failed, run = json.loads((tmp_path / "run_book.json").read_text())
    assert (failed["variant"], failed["failed"], run["variant"]) == ("bad", 2, "plain") and "failed" not in run
    assert "variant bad: " in done.stdout and "TTS_JOBS_DEVICE=abacus" in done.stdout
    assert "| bad | 1 |" in done.stdout and "| failed (2) |" in done.stdout
    assert run["audio_s"] > 0 and run["wall_s"] > 0 and run["stages"]
    stages = dict(run["stages"])  # when the first sentence's WAV appeared, among the stages
    assert 0 < stages["first sentence written"] < run["wall_s"]
    assert stages["speaking"] <= stages["first sentence written"] < stages["assembling"]
    assert "| variant | run | wall s | audio s | x real time |" in done.stdout
    assert "host: a 1,000,000-step Python loop in" in done.stdout  # which host it was
    # how busy the host's cores were in each stage: between none and all of them
    busy = dict(run["cores_busy"])
    assert set(busy) <= set(stages) and busy  # a stage shorter than a sample (0.25 s) has none
    assert all(0 <= cores <= (os.cpu_count() or 1) + 0.5 for cores in busy.values())


def test_run_book_refuses_a_variant_it_cannot_run(tmp_path: Path) -> None:
    done = bench("run-book", "--cpu-smoke", "--variant", "old=no-such-tree", out=tmp_path)

    assert done.returncode == 2 and "--variant 'old=no-such-tree': give LABEL=TREE" in done.stderr


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server on PATH")
def test_workers_scaling_takes_books_through_celery_workers_and_reports_the_phase(tmp_path: Path) -> None:
    done = bench("workers-scaling", "--cpu-smoke", "--phases", "one", "--format", "wav",
                 "--sentences-per-book", "6", "--chapters-per-book", "1", "--budget", "500",
                 "--kit", str(tmp_path / "no-kit"), out=tmp_path)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "scaling.json").read_text())
    [phase] = report["phases"]
    assert phase["phase"] == "one" and phase["sentences"] >= 12 and len(phase["outputs"]) == 2
    assert "error" not in report and (tmp_path / "logs").is_dir()
    assert f"| one | 1 | {phase['sentences']} |" in done.stdout
    # the host's busy cores while spoken and after the last batch (/proc/stat: some, never more than it has)
    assert 0 < phase["cores_busy"]["synthesizing"] <= os.cpu_count()

"""The engine's measurement tools of ``python -m pipeline.bench`` in their CPU smoke modes (tiny
SYNTHETIC weights: noise, never speech; they measure nothing here): each runs end to end and
reports what it would measure on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.bench", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, check=False, env={**os.environ, **env})


def test_oom_reports_every_sentence_back_the_same() -> None:
    done = bench("oom", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{"):])
    assert report["cap_gib"] is None  # no cap on a CPU
    assert report["sentences_back"] == report["rows"] == 4
    assert report["same_lengths"] and report["identical"]


def test_graph_check_compares_each_way_with_the_eager_loop() -> None:
    done = bench("graph-check", "--cpu-smoke")

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "rows identical to eager" in line]
    assert len(lines) == 4 and all(" 6/6 rows identical" in line for line in lines)


def test_step_profile_profiles_eager_steps_and_times_the_runner() -> None:
    done = bench("step-profile", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    assert "aten::" in done.stdout  # the profiler's table
    assert "eager step:" in done.stdout and "ms/step at 4 rows x 64 positions" in done.stdout


def test_attention_check_compares_the_engine_kernels_and_the_candidate_with_float32() -> None:
    done = bench("attention", "--check", TRITON_INTERPRET="1")

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    kernels = {line.split()[0] for line in done.stdout.splitlines() if "relative error" in line}
    assert kernels == {"engine", "split", "dot", "dot8"}

"""The H200 measurement module (pipeline/bench/gpu_checks.py) in its CPU smoke mode: tiny synthetic
weights, Triton's interpreter for the attention kernels, a simulated cap for the out-of-memory
check — every section runs to its table, so the GPU call cannot fail for a silly reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_every_section_runs_to_its_table_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = tmp_path / "checks.json"
    done = subprocess.run([sys.executable, "-m", "pipeline.bench.gpu_checks", "--cpu-smoke", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "all sections ran" in done.stdout
    tables = json.loads(out.read_text())["tables"]
    assert list(tables) == ["attention", "kernels", "oom", "caps"]  # the caps last: a cap stays set
    assert {row["kernel"] for row in tables["attention"]} == {"single", "words", "split"}
    assert all(row["rel_error"] < 1e-2 for row in tables["attention"])
    engine_release, fallback = tables["oom"]
    assert engine_release["spoken"] == engine_release["rows"] and engine_release["failures"] >= 1
    assert engine_release["calls"].startswith("8! 4! 2 2")  # halved, then the second half cut at once
    assert {row["kernel"] for row in tables["kernels"]} == {"single", "words"}
    assert [row["cap_gib"] for row in tables["caps"]] == [4.0, 8.0, 24.0]
    for heading in ("### attention", "### oom", "### kernels", "### caps"):
        assert heading in done.stdout


def test_unknown_sections_are_refused_before_anything_loads() -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline.bench.gpu_checks", "--sections", "attention,speed"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "choose from" in done.stderr

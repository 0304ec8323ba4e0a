"""The CPU measurement tools of ``python -m pipeline.bench``, each run end to end on a small input:
the GPU trace reader, the ingestion benchmark (alone and through the job path) and the assembly
benchmark. They measure nothing here; they must run and report what they measured."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.bench", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, check=False)


def kernel(name: str, start: float, duration: float, stream: int = 7) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": duration, "args": {"stream": stream}}


def test_trace_gaps_finds_the_gpu_idle_between_two_kernels_and_the_host_call_meanwhile(tmp_path: Path) -> None:
    events = [kernel("gemm", 0, 100), kernel("attention", 400, 50),
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 90, "dur": 320}]
    trace = tmp_path / "trace-fp16-8.json.gz"
    with gzip.open(trace, "wt") as out:
        json.dump({"traceEvents": events}, out)

    done = bench("trace-gaps", str(trace), "--min-gap-us", "100")

    assert done.returncode == 0, done.stderr
    assert "GPU span 0.5 ms, busy (any stream) 0.1 ms, idle 0.3 ms; 2 kernels/copies" in done.stdout
    assert "| 0.1 | 300 | gemm | attention | cudaStreamSynchronize |" in done.stdout


def test_trace_gaps_adds_up_each_kernels_gpu_time_by_name_largest_first(tmp_path: Path) -> None:
    """Three launches of one attention kernel outweigh one longer GEMM; a second stream's kernel is
    a share of that stream's own busy time."""
    events = [kernel("gemm", 0, 100), kernel("attention", 100, 60), kernel("attention", 200, 60),
              kernel("attention", 300, 60), kernel("vocos", 0, 40, stream=9)]
    trace = tmp_path / "trace-fp16-8.json.gz"
    with gzip.open(trace, "wt") as out:
        json.dump({"traceEvents": events}, out)

    done = bench("trace-gaps", str(trace))

    assert done.returncode == 0, done.stderr
    table = done.stdout.split("GPU time by kernel")[1].splitlines()
    assert table[3] == "| 7 | attention | 0.2 | 64.3 | 3 | 60.0 |"
    assert table[4] == "| 7 | gemm | 0.1 | 35.7 | 1 | 100.0 |"
    assert table[5] == "| 9 | vocos | 0.0 | 100.0 | 1 | 40.0 |"


def test_memory_peak_names_what_held_the_most_at_the_peak_by_the_projects_own_frame(tmp_path: Path) -> None:
    """A pool allocated by the engine, a warm-up block freed before the peak, two cache blocks made
    by one line at the peak and a block made after it: only what was alive at the peak is named,
    grouped by the innermost frame of pipeline/ or jobs/ (not torch's, nor its caller's)."""
    import pickle

    def frames(own: str) -> list[dict]:
        return [{"filename": "/site/torch/nn/modules/module.py", "line": 1, "name": "_apply"},
                {"filename": f"/srv/tts-jobs/pipeline/engine/{own}", "line": 40, "name": "make"},
                {"filename": "/srv/tts-jobs/jobs/batches/slots.py", "line": 9, "name": "open_slots"}]

    gib = 2**30
    events = [{"action": "alloc", "addr": 1, "size": 4 * gib, "frames": frames("pool.py")},
              {"action": "alloc", "addr": 2, "size": 2 * gib, "frames": frames("warm_up.py")},
              {"action": "free_requested", "addr": 2, "size": 2 * gib, "frames": []},
              {"action": "free_completed", "addr": 2, "size": 2 * gib, "frames": []},
              {"action": "alloc", "addr": 3, "size": 3 * gib, "frames": frames("kv_cache.py")},
              {"action": "alloc", "addr": 4, "size": 2 * gib, "frames": frames("kv_cache.py")},
              {"action": "free_completed", "addr": 4, "size": 2 * gib, "frames": []},
              {"action": "alloc", "addr": 5, "size": 1 * gib, "frames": frames("late.py")}]
    snapshot = tmp_path / "memory.pickle"
    snapshot.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))

    done = bench("memory-peak", str(snapshot))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("device 0: peak 9.00 GiB allocated")
    assert "pipeline/engine/kv_cache.py:40 make" in lines[1] and "5.000 GiB" in lines[1] and " 2 blocks" in lines[1]
    assert "pipeline/engine/pool.py:40 make" in lines[2] and "4.000 GiB" in lines[2]
    assert len(lines) == 3  # neither the warm-up's block (freed) nor the late one was alive at the peak


def test_ingest_reads_a_generated_novel_and_reports_its_size_and_time() -> None:
    done = bench("ingest", "--size-mb", "0.03")

    assert done.returncode == 0, done.stderr
    assert "EPUB 0.0 MB" in done.stderr and "read_book + split_sentences" in done.stderr
    assert "as a job" not in done.stderr


def test_ingest_with_jobs_also_times_submit_ingest_and_plan() -> None:
    done = bench("ingest", "--size-mb", "0.03", "--jobs", "--max-batch", "16")

    assert done.returncode == 0, done.stderr
    assert "as a job: submit" in done.stderr and "batches of <= 16" in done.stderr
    assert "a run's plan in two goes: its first waves" in done.stderr


@pytest.mark.slow
def test_assembly_assembles_synthetic_sentences_and_reports_the_speed(tmp_path: Path) -> None:
    done = bench("assembly", "--hours", "0.01", "--chapters", "2", "--formats", "wav", "--keep", str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "x real time" in done.stdout and "formats      wav: 2 file(s)" in done.stdout
    assert list(tmp_path.rglob("*.wav"))

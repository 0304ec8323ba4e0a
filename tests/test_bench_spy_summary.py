"""`python -m pipeline.bench spy-summary`: a py-spy profile of the workers, read per process and thread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = 'process 10:"celery worker --gpu 0";process 11:"celery worker --gpu 0"'
PROFILE = "\n".join([
    # the forked child's stacks start with its parent's process frame
    f"{WORKER};thread (11): MainThread;warm_up (engine.py:400);run (generation.py:170);"
    "_try_wait (subprocess.py:2011) 80",
    f"{WORKER};thread (11): MainThread;Engine.synthesize_stream (engine.py:193);"
    "run (generation.py:170);_harvest (generation.py:249) 30",
    f"{WORKER};thread (11): MainThread;Engine.synthesize_stream (engine.py:193);"
    "run (generation.py:170);synchronize (torch/cuda/streams.py:1) 70",
    f"{WORKER};thread (12): wav-writer_0;Engine.synthesize_stream (x.py:1);write (wavio.py:9) 5",
    'process 10:"celery worker --gpu 0";thread (10): MainThread;loop (kombu.py:1) 400',
    "not a stack line",
])


def summary(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / "spy.txt"
    profile.write_text(PROFILE)
    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "spy-summary", str(profile), *args],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return done.stdout


def test_samples_are_counted_for_the_child_process_inside_the_frame_asked_for(tmp_path: Path) -> None:
    out = summary(tmp_path, "--within", "Engine.synthesize_stream",
                  "--count", "_harvest", "synchronize", "_try_wait")
    lines = out.splitlines()
    assert lines[0] == 'process 11:"celery worker --gpu 0": 185 samples, 105 inside \'Engine.synthesize_stream\''
    counts = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    # the warm-up's compile is outside the stream; the parent's own samples are not the child's
    assert counts == {"_harvest": ["30", "(29%)"], "synchronize": ["70", "(67%)"],
                      "_try_wait": ["0", "(0%)"]}
    assert "process 10" not in out  # nothing of the parent inside the stream


def test_threads_are_told_apart_when_asked(tmp_path: Path) -> None:
    out = summary(tmp_path, "--within", "Engine.synthesize_stream", "--threads")
    assert 'process 11:"celery worker --gpu 0";thread (11): MainThread: 180 samples, 100 inside' in out
    assert 'thread (12): wav-writer_0: 5 samples, 5 inside' in out

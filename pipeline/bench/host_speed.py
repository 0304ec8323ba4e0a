"""How fast this host's side of a GPU is: hosts of one lent kind differ ~3x in how quickly Python
runs and queues GPU work (docs/benchmarks.md), and every phase the host feeds op by op (a command's
start, the eager prefill, Decoder + Vocos) follows it. Printed beside a measurement so that rows
from different hosts can be told apart; rows of one call still compare best.

    python -m pipeline.bench.host_speed
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def python_loop_ms(iterations: int = 1_000_000) -> float:
    """A pure-Python loop's milliseconds (the interpreter's speed on one core)."""
    began = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i
    return (time.perf_counter() - began) * 1e3


def launches_ms(ops: int = 10_000) -> float | None:
    """Milliseconds to queue ``ops`` tiny ops on the GPU and see them done (None without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    x = torch.zeros(16, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(ops):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - began) * 1e3


def quiet_disk() -> str:
    """Write back every dirty page before a timed run: a run right after another (or after the
    bench wrote full-size weights) otherwise shares the disk with the last one's writeback (a
    24-hour book leaves ~5 GB of WAVs), and its start paid for it: the engine's load took 2.2-3.4 s
    in every run that followed another on an H100 host and 1.8 s in the call's first. A user's
    second run of a book does not start one second after their first ended."""
    began = time.perf_counter()
    os.sync()
    return f"disk synced in {time.perf_counter() - began:.1f} s before the run"


def describe() -> str:
    """One line: the loop's time and, on a GPU, the launches'."""
    loop = min(python_loop_ms() for _ in range(3))
    launches = launches_ms()
    gpu = f"; 10,000 small CUDA ops queued and done in {launches:.0f} ms" if launches is not None else ""
    return f"host: a 1,000,000-step Python loop in {loop:.0f} ms{gpu}"


def measured_apart() -> str:
    """``describe()`` from a process of its own: the caller keeps no CUDA context (and its memory)
    while the runs it times use the GPU."""
    done = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[2], timeout=300)
    return done.stdout.strip() or f"host: not measured ({done.stderr.strip()[-200:]})"


def main() -> int:
    print(describe(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How many of the host's cores a measured run kept busy (``/proc/stat``), stage by stage: whether a
stage waited on the cores or on something else (`run-book`, `workers-scaling`)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


class CoresBusy:
    """How many of the host's cores were busy (``/proc/stat``: not idle, not waiting on the disk),
    sampled every quarter second from ``started`` until ``stop()``: whether a stage waited on the
    host's cores or on something else. Empty where there is no ``/proc/stat``."""

    def __init__(self, started: float) -> None:
        self._samples: list[tuple[float, float]] = []  # (seconds from start, busy cores since the last)
        self._started, self._stopped = started, threading.Event()
        threading.Thread(target=self._sample, name="cores-busy", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def between_stages(self, stages: list[tuple[str, float]], wall: float) -> list[tuple[str, float]]:
        """The mean busy cores from each stage's start to the next's (the last: to ``wall``)."""
        bounds = [at for _, at in stages[1:]] + [wall]
        means = []
        for (name, begin), end in zip(stages, bounds):
            inside = [busy for at, busy in self._samples if begin < at <= end]
            if inside:
                means.append((name, sum(inside) / len(inside)))
        return means

    def _sample(self) -> None:
        last = _cpu_times()
        while last is not None and not self._stopped.wait(0.25):
            now = _cpu_times()
            if now is None:
                return
            elapsed = (now[0] - last[0]) or 1
            busy = (now[0] - last[0]) - (now[1] - last[1])
            self._samples.append((time.monotonic() - self._started, busy / elapsed * (os.cpu_count() or 1)))
            last = now


def _cpu_times() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) of every core together, or None without /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(f) for f in fields]
    return sum(values[:8]), values[3] + values[4]

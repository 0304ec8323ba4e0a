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
    host's cores or on something else. Empty where there is no ``/proc/stat``.

    ``trees``: processes by name (a worker's main process, say), each with every process below it
    sampled too (``tree_cores``): which of them the busy cores went to."""

    def __init__(self, started: float, trees: dict[str, int] | None = None) -> None:
        self._samples: list[tuple[float, float]] = []  # (seconds from start, busy cores since the last)
        self._tree_samples: list[tuple[float, dict[str, float]]] = []
        self._trees = dict(trees or {})
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

    def trees_between_stages(self, stages: list[tuple[str, float]], wall: float) -> dict[str, dict[str, float]]:
        """Each stage's mean busy cores of each of the ``trees``."""
        bounds = [at for _, at in stages[1:]] + [wall]
        means: dict[str, dict[str, float]] = {}
        for (name, begin), end in zip(stages, bounds):
            inside = [cores for at, cores in self._tree_samples if begin < at <= end]
            if inside:
                means[name] = {tree: sum(c[tree] for c in inside) / len(inside) for tree in self._trees}
        return means

    def _sample(self) -> None:
        last, last_trees, last_at = _cpu_times(), tree_seconds(self._trees), time.monotonic()
        while last is not None and not self._stopped.wait(0.25):
            now, trees, at = _cpu_times(), tree_seconds(self._trees), time.monotonic()
            if now is None:
                return
            elapsed = (now[0] - last[0]) or 1
            busy = (now[0] - last[0]) - (now[1] - last[1])
            self._samples.append((at - self._started, busy / elapsed * (os.cpu_count() or 1)))
            if self._trees:
                self._tree_samples.append((at - self._started, {
                    name: max(0.0, trees[name] - last_trees[name]) / (at - last_at) for name in trees}))
            last, last_trees, last_at = now, trees, at


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_seconds(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds of each named process and every live process below it, with the children they
    reaped (``/proc/<pid>/stat``: utime, stime, cutime, cstime): a short-lived child's time moves
    into its parent's when it is reaped, so a tree's sum only grows. Zeros without ``/proc``."""
    parents, ticks = {}, {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        entries = []
    for name in entries:
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone since the listing
        parents[int(name)], ticks[int(name)] = int(fields[1]), sum(int(f) for f in fields[11:15])
    owner = {pid: name for name, pid in roots.items()}
    totals = dict.fromkeys(roots, 0.0)
    for pid, spent in ticks.items():
        ancestor, seen = pid, 0
        while ancestor not in owner and ancestor in parents and seen < 64:
            ancestor, seen = parents[ancestor], seen + 1
        if ancestor in owner:
            totals[owner[ancestor]] += spent / CLOCK_TICKS
    return totals


def _cpu_times() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) of every core together, or None without /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(f) for f in fields]
    return sum(values[:8]), values[3] + values[4]

"""How many of the host's cores a measured run kept busy (``/proc/stat``), stage by stage: whether a
stage waited on the cores or on something else (`run-book`, `workers-scaling`), and which
processes they went to (``/proc/<pid>/stat``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

Groups = Callable[[], dict[str, float]]  # CPU seconds so far of each group of processes


class CoresBusy:
    """How many of the host's cores were busy (``/proc/stat``: not idle, not waiting on the disk),
    sampled every quarter second from ``started`` until ``stop()``: whether a stage waited on the
    host's cores or on something else. Empty where there is no ``/proc/stat``.

    ``groups`` (``named_trees``, ``parts_of``): CPU seconds of groups of processes, sampled with
    the host's: which of them the busy cores went to."""

    def __init__(self, started: float, groups: Groups | None = None) -> None:
        self._samples: list[tuple[float, float]] = []  # (seconds from start, busy cores since the last)
        self._group_samples: list[tuple[float, dict[str, float]]] = []  # (seconds, cores of each group)
        self._groups = groups
        self._started, self._stopped = started, threading.Event()
        threading.Thread(target=self._sample, name="cores-busy", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def between_stages(self, stages: list[tuple[str, float]], wall: float) -> list[tuple[str, float]]:
        """The mean busy cores from each stage's start to the next's (the last: to ``wall``)."""
        means = []
        for name, inside in _per_stage(self._samples, stages, wall):
            means.append((name, sum(inside) / len(inside)))
        return means

    def groups_between_stages(self, stages: list[tuple[str, float]], wall: float) -> dict[str, dict[str, float]]:
        """Each stage's mean busy cores of each group (a group absent from a sample had none)."""
        means: dict[str, dict[str, float]] = {}
        for name, inside in _per_stage(self._group_samples, stages, wall):
            groups = sorted({group for cores in inside for group in cores})
            means[name] = {group: sum(c.get(group, 0.0) for c in inside) / len(inside) for group in groups}
        return means

    def _sample(self) -> None:
        last, last_groups, last_at = _cpu_times(), self._read_groups(), time.monotonic()
        while last is not None and not self._stopped.wait(0.25):
            now, groups, at = _cpu_times(), self._read_groups(), time.monotonic()
            if now is None:
                return
            elapsed = (now[0] - last[0]) or 1
            busy = (now[0] - last[0]) - (now[1] - last[1])
            self._samples.append((at - self._started, busy / elapsed * (os.cpu_count() or 1)))
            if self._groups is not None:
                self._group_samples.append((at - self._started, {
                    name: max(0.0, spent - last_groups.get(name, 0.0)) / (at - last_at)
                    for name, spent in groups.items()}))
            last, last_groups, last_at = now, groups, at

    def _read_groups(self) -> dict[str, float]:
        return self._groups() if self._groups is not None else {}


def _per_stage(samples: list, stages: list[tuple[str, float]], wall: float) -> list[tuple[str, list]]:
    """Each stage's samples, from its start to the next's (the last: to ``wall``); stages without any
    left out."""
    bounds = [at for _, at in stages[1:]] + [wall]
    found = []
    for (name, begin), end in zip(stages, bounds):
        inside = [value for at, value in samples if begin < at <= end]
        if inside:
            found.append((name, inside))
    return found


def _cpu_times() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) of every core together, or None without /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(f) for f in fields]
    return sum(values[:8]), values[3] + values[4]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def named_trees(roots: dict[str, int]) -> Groups:
    """Each named process with every live process below it (``tree_seconds``)."""
    return lambda: tree_seconds(roots)


def tree_seconds(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds of each named process and every live process below it, with the children they
    reaped (``/proc/<pid>/stat``: utime, stime, cutime, cstime): a short-lived child's time moves
    into its parent's when it is reaped, so a tree's sum only grows. Zeros without ``/proc``."""
    processes = _processes()
    owner = {pid: name for name, pid in roots.items()}
    totals = dict.fromkeys(roots, 0.0)
    for pid, (_, own, reaped, _) in processes.items():
        top = _ancestor_in(pid, owner, processes)
        if top is not None:
            totals[owner[top]] += (own + reaped) / CLOCK_TICKS
    return totals


def parts_of(root: int, name_of: Callable[[str], str]) -> Groups:
    """``root``'s CPU seconds by part: its own ("itself"), its reaped children's ("reaped by
    itself": the encoders it ran, say), and each live child's with all below it, grouped by
    ``name_of(the child's command line)``."""
    def read() -> dict[str, float]:
        processes = _processes()
        totals: dict[str, float] = {}
        if root in processes:
            _, own, reaped, _ = processes[root]
            totals["itself"], totals["reaped by itself"] = own / CLOCK_TICKS, reaped / CLOCK_TICKS
        children = {pid: pid for pid, (parent, *_) in processes.items() if parent == root}
        for pid, (_, own, reaped, _) in processes.items():
            top = _ancestor_in(pid, children, processes)
            if top is not None:
                name = name_of(processes[top][3])
                totals[name] = totals.get(name, 0.0) + (own + reaped) / CLOCK_TICKS
        return totals
    return read


def _ancestor_in(pid: int, wanted: dict[int, object], processes: dict[int, tuple[int, int, int, str]]) -> int | None:
    """``pid`` or its nearest ancestor that is in ``wanted``, if any."""
    seen = 0
    while pid not in wanted and pid in processes and seen < 64:
        pid, seen = processes[pid][0], seen + 1
    return pid if pid in wanted else None


def _processes() -> dict[int, tuple[int, int, int, str]]:
    """Every live process: (parent, own ticks, its reaped children's ticks, command line)."""
    found = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for name in entries:
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # gone since the listing
        ticks = [int(f) for f in fields[11:15]]
        found[int(name)] = (int(fields[1]), ticks[0] + ticks[1], ticks[2] + ticks[3], command)
    return found

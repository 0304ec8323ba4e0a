"""Running assembly jobs side by side: heaviest first, one per core unless told otherwise."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

_R = TypeVar("_R")


def worker_count(requested: int) -> int:
    """Jobs to run at once: ``requested``, or one per core this process may run on when it is 0."""
    if requested > 0:
        return requested
    try:
        return max(1, len(os.sched_getaffinity(0)))  # honours taskset/cgroup pinning, unlike cpu_count
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_longest_first(jobs: Sequence[tuple[int, Callable[[], _R]]], threads: int) -> list[_R]:
    """Run ``(weight, job)`` pairs on a thread pool, heaviest first; results in the given order.

    Heaviest first, so no core idles at the end waiting for one long chapter. The threads either
    do GIL-free work themselves (ffmpeg runs, numpy) or wait on helper processes
    (:mod:`pipeline.audio.stitch_helpers`). After a failure the jobs not yet started are cancelled,
    the running ones finish (so none leaves a temporary file behind), and the first error is raised.
    """
    order = sorted(range(len(jobs)), key=lambda index: -jobs[index][0])
    with ThreadPoolExecutor(max_workers=worker_count(threads)) as pool:
        futures = {index: pool.submit(jobs[index][1]) for index in order}
        done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
        if any(future.exception() is not None for future in done):
            for future in futures.values():
                future.cancel()
    return [futures[index].result() for index in range(len(jobs))]


def bind(function: Callable[..., _R], *args: object) -> Callable[[], _R]:
    """``function(*args)`` as a job for :func:`run_longest_first`."""
    return lambda: function(*args)

"""Time a piece of GPU work by CUDA events over repeated runs (wall time on a CPU, for the smoke
modes): the measurement tools' one timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def seconds_per_run(run: Callable[[], Any], repeats: int = 20, warm_ups: int = 3) -> float:
    """Seconds one ``run()`` takes, averaged over ``repeats`` after ``warm_ups`` untimed runs."""
    import torch

    for _ in range(warm_ups):
        run()
    if not torch.cuda.is_available():
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        return (time.perf_counter() - started) / repeats
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats

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


def graphed_seconds_per_run(run: Callable[[], Any], repeats: int = 20) -> float:
    """As ``seconds_per_run``, but the ``repeats`` runs captured as one CUDA graph and replayed:
    a few-µs kernel's own time, not the host's time to launch it (a launch from Python takes
    ~10 µs, longer than a GEMM of a decode step's shape). Wall time on a CPU."""
    import torch

    if not torch.cuda.is_available():
        return seconds_per_run(run, repeats)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture (cuBLAS picks and allocates here)
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            run()
    return seconds_per_run(graph.replay, repeats=5, warm_ups=1) / repeats


def copy_ceiling_tbs(device: Any, gib: float = 1.0) -> float:
    """The device's memory bandwidth as a device-to-device copy of ``gib`` GiB reaches it, read and
    write counted (TB/s): the ceiling a bandwidth-bound step is measured against on this card (an
    H200 ~4.3, an H100 ~3). Its memory is given back."""
    import torch

    size = int(gib * 2**30)
    seconds = _copy_seconds(device, size)
    torch.cuda.empty_cache()
    return 2 * size / seconds / 1e12


def _copy_seconds(device: Any, size: int) -> float:
    import torch

    source = torch.empty(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return seconds_per_run(lambda: target.copy_(source), repeats=10)

"""Recording a CUDA graph without stopping the device.

``torch.cuda.graph`` synchronises the whole device, runs Python's garbage collector and empties
the allocator's cache before every capture: ~90 ms of host time per capture in a process that
has loaded the engine (the collector alone, on the 2-core build machine), times the 11 graphs a
batch's decode slots need before its first step, and a stall of every queued kernel for a
capture in mid-book. None of it is needed here: what a graph reads and writes is allocated
before the capture, and each capture's own allocations come from its pool.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def capture(graph: torch.cuda.CUDAGraph, pool: tuple[int, int], stream: torch.cuda.Stream,
            body: Callable[[], object]) -> None:
    """Record ``body()`` into ``graph`` on ``stream`` (a stream kept for captures, ordered after
    the caller's current stream), allocating from ``pool``. ``thread_local``: other threads go
    on launching work on their own streams meanwhile (the callers keep this process's other
    captures out with ``step_graphs.CAPTURE_LOCK``). Nothing runs: replay to run it."""
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            body()
        finally:
            graph.capture_end()
    current.wait_stream(stream)

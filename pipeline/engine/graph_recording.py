"""Recording a CUDA graph mid-book, beside work the process already queued.

``torch.cuda.graph`` synchronises the whole device and empties the allocator's cache before each
capture: fine before the first step, a stall of every queued decode step in mid-book. The graphs
captured then (Decoder+Vocos chunks, admissions' prefills) read and write buffers allocated
before, and take their own allocations from their pool, so neither is needed. Under a memory
cap these graphs are off: there the emptied cache is what lets a capture fit.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Allowed = Callable[[torch.device], bool]  # whether graphs may be kept on a device (its memory)


def record(pool: tuple[int, int], stream: torch.cuda.Stream, body: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """``body()`` recorded (nothing runs) on ``stream``, ordered after the caller's current
    stream, allocating from ``pool``. ``thread_local``: other threads go on launching on their
    own streams meanwhile; the callers keep this process's other captures out
    (``step_graphs.CAPTURE_LOCK``)."""
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin(pool=pool, capture_error_mode="thread_local")
            try:
                body()
            finally:
                graph.capture_end()
    finally:
        current.wait_stream(stream)
    return graph

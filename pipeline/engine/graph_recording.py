"""Recording a CUDA graph mid-book, beside work the process already queued; a set of such graphs.

``torch.cuda.graph`` synchronises the whole device and empties the allocator's cache before each
capture: fine before the first step, a stall of every queued decode step in mid-book. The graphs
captured then (Decoder+Vocos chunks, admissions' prefills) read and write buffers allocated
before, and take their own allocations from their pool, so neither is needed. Under a memory
cap these graphs are off: there the emptied cache is what lets a capture fit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

import torch

from pipeline.engine.streams import forked, kept_stream

log = logging.getLogger(__name__)

Allowed = Callable[[torch.device], bool]  # whether graphs may be kept on a device (its memory)


class HostTime:
    """Host seconds summed over ``timed()`` blocks: here, shapes' first (eager) runs and their
    captures, during which, mid-book, the decode steps' queue runs dry."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def timed(self) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - began


def record(pool: tuple[int, int], stream: torch.cuda.Stream, body: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """``body()`` recorded (nothing runs) on ``stream``, ordered after the caller's current
    stream, allocating from ``pool``. ``thread_local``: other threads go on launching on their
    own streams meanwhile; the callers keep this process's other captures out
    (``step_graphs.CAPTURE_LOCK``)."""
    graph = torch.cuda.CUDAGraph()
    with forked(stream), torch.cuda.stream(stream):
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            body()
        finally:
            graph.capture_end()
    return graph


class GraphSet:
    """Graphs of one kind of work (``what``: Decoder+Vocos chunks, prefills), one per shape, that
    share one memory pool and one capture stream. A capture that fails turns them off (the work
    runs eagerly from then on); so does running out of memory (a device short of it cannot spare
    a pool that keeps its memory between runs), after which the out-of-memory policy retries."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.enabled = True
        self.captured = 0
        self.new_shapes = HostTime()  # the host time of shapes' first runs and captures
        self._graphs: dict[Hashable, torch.cuda.CUDAGraph] = {}
        self._pool: tuple[int, int] | None = None

    def get(self, shape: Hashable) -> torch.cuda.CUDAGraph | None:
        return self._graphs.get(shape)

    def stream(self, device: torch.device) -> torch.cuda.Stream:
        """The stream the graphs are captured on (a shape's first, eager run too)."""
        return kept_stream(f"{self.what} graphs", device)

    def capture(self, shape: Hashable, device: torch.device, body: Callable[[], object]) -> None:
        """``body()`` recorded as ``shape``'s graph (nothing runs)."""
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        try:
            graph = record(self._pool, self.stream(device), body)
        except torch.OutOfMemoryError:
            self.release(for_good=True)
            raise
        except RuntimeError as exc:  # an op that cannot be captured: eager from now on
            log.warning("%s graph capture failed (%s); they run eagerly", self.what, exc)
            self.release(for_good=True)
            return
        self._graphs[shape] = graph
        self.captured += 1

    def release(self, for_good: bool = False) -> None:
        """Drop every graph and their pool; ``for_good``: capture none again."""
        self._graphs.clear()
        self._pool = None
        self.enabled = self.enabled and not for_good

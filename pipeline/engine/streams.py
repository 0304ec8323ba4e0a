"""The CUDA streams the engine keeps (one per purpose, device and priority, for the process's
life), and work forked onto one and joined back.

Why kept: each new ``torch.cuda.Stream`` is the next of PyTorch's pool of 32 (per priority), and
each keeps a cuBLAS workspace of its own (allocated for good, pinning its segment) and cached
blocks that no other stream reuses. Decoder + Vocos on a new stream per batch made a worker's
reserved memory creep up batch after batch; a new stream per decode step would cycle through all 32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

HIGHEST = -(1 << 20)  # a priority PyTorch clamps to the device's highest (lower: more urgent)
_kept: dict[tuple[str, int, int], torch.cuda.Stream] = {}


def kept_stream(purpose: str, device: torch.device, priority: int = 0) -> torch.cuda.Stream:
    """The stream for ``purpose`` on ``device`` at ``priority``, made the first time it is asked for."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (purpose, index, priority)
    if key not in _kept:
        _kept[key] = torch.cuda.Stream(index, priority=priority)
    return _kept[key]


@contextlib.contextmanager
def forked(stream: torch.cuda.Stream | None) -> Iterator[None]:
    """``stream`` ordered after everything the current stream has queued so far; leaving, however
    it is left, the current stream waits for it: a fork and a join (also inside a graph capture,
    which the stream then joins). Work goes to ``stream`` inside ``torch.cuda.stream(stream)``.
    None (no GPU): nothing changes."""
    if stream is None:
        yield
        return
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    try:
        yield
    finally:
        current.wait_stream(stream)

"""The CUDA streams the engine keeps: one per purpose, device and priority, for the process's life.

Why kept: each new ``torch.cuda.Stream`` is the next of PyTorch's pool of 32 (per priority), and
each keeps a cuBLAS workspace of its own (allocated for good, pinning its segment) and cached
blocks that no other stream reuses. Decoder + Vocos on a new stream per batch made a worker's
reserved memory creep up batch after batch; a new stream per decode step would cycle through all 32.
"""

from __future__ import annotations

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

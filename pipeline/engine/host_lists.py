"""Small host lists (slot numbers, lengths, settings) onto the GPU without waiting for it.

``torch.tensor(values, device="cuda")`` copies synchronously: the host waits until every kernel
already queued on the stream has run, then the GPU idles while the host queues the next ones.
In the generation loop that would happen at every harvest, refill and waveform launch (the
bench's host profile on the H200: 0.34 s of a 2.1 s run inside such copies, docs/engine.md). A
non-blocking copy from pinned memory is ordered on the stream like a kernel, and PyTorch's
pinned-memory cache keeps the host buffer until the copy has run.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def to_device(values: Sequence[int | float | bool], device: torch.device,
              dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return pinned_to_device(torch.tensor(values, dtype=dtype), device)


def pinned_to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor onto ``device``, queued on the stream rather than waited for."""
    if device.type != "cuda":
        return host
    return host.pin_memory().to(device, non_blocking=True)

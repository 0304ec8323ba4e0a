"""A decode step's layers for the first half of the slots and for the second half on two CUDA
streams at once (``EngineTuning.step_halves``, ``TTS_JOBS_STEP_HALVES``; off until an H200 says).

A step at ~1,000 slots takes turns between GEMMs (compute-bound) and the word attention over the
int8 cache (bandwidth-bound), each leaving the other's resource idle. The slots share nothing
within a step's layers (each attends only its own cache), so each half can go through all the
layers as a chain of its own: one half's attention beside the other's GEMMs. Smaller GEMMs are
less efficient, and the GPU schedules blocks, not halves: ``python -m pipeline.bench halves``
measures the trade on a card before the engine's own bench does. Each half's sums are the
one-stream step's row for row (a GEMM's rows do not depend on each other), though cuBLAS may tile
half as many rows another way: an fp16 rounding, and on random weights' flat logits a rare argmax,
may differ (tests/gpu/test_gpu_graph_check.py holds them to the eager tokens as fp16 steps are).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pipeline.engine.streams import forked, kept_stream

ON = False
MIN_ROWS = 256  # below this the halves' GEMMs run far from their peak (bench linears: 256 rows take
# 0.42 ms a step's worth, 1,024 rows 0.77 on an H100)
ALIGN = 64  # the first half's rows a multiple of this: the GEMMs' tiles stay whole


def in_halves(rows: int, on: torch.Tensor, run: Callable[[slice], torch.Tensor]) -> torch.Tensor:
    """``run(slice(0, rows))``, or, where halves are on and pay (CUDA, ``MIN_ROWS`` or more),
    ``run`` of the first half on the current stream and of the second on a side stream at once,
    joined and concatenated along rows. Inside a graph capture the fork and join are captured."""
    if not (ON and on.is_cuda and rows >= MIN_ROWS):
        return run(slice(0, rows))
    half = rows // 2 // ALIGN * ALIGN
    current = torch.cuda.current_stream(on.device)
    side = kept_stream("step half", on.device, current.priority)
    with forked(side):
        with torch.cuda.stream(side):
            second = run(slice(half, rows))
        first = run(slice(0, half))
    return torch.cat([first, second])

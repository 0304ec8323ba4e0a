"""A decode step's GPT as two halves of its rows on two CUDA streams, the second half one block
behind the first, so that one half's GEMMs can run beside the other's attention.

Why: at ~1,000 rows a step is bound both by the int8 cache's bytes (its attention: 1.1-1.3 ms of an
H100's 2.7-ms step even at the copy ceiling) and by the tensor cores (the projections and the MLP:
~0.4 TFLOP a step at 1,024 rows, 0.4 ms or more), and one stream runs them one after the other. Two
independent halves in one graph let the GPU overlap them: the second half is launched on a side
stream, the rest of the first on the current one, and only then are they joined. Starting the
second half after the first half's first attention block keeps the halves out of step (in step,
both would read the cache at once, then both multiply). Off by default (``TTS_JOBS_STEP_HALVES=1``,
``EngineTuning.step_halves``) until a device call measures it against the whole step; on the CPU
the halves run one after the other with the same results, which is what the tests hold it to.
"""

from __future__ import annotations

import torch

import pipeline.engine.layer_ops as layer_ops
from pipeline.engine.gpt import FusedLlama
from pipeline.engine.kv_cache import SlotCache
from pipeline.engine.streams import forked, kept_stream

ON = False  # EngineTuning.step_halves (loading.apply_tuning)
HALVES_FROM = 256  # fewer rows run whole: halves of a few rows have nothing to overlap


def forward_slots(gpt: FusedLlama, x: torch.Tensor, rope_at: torch.Tensor, cache: SlotCache,
                  write_at: torch.Tensor, attend: int, live: torch.Tensor) -> torch.Tensor:
    """``gpt.forward_slots`` over the first B slots, in two halves where ``ON`` and B is large."""
    rows = x.shape[0]
    if not ON or rows < HALVES_FROM:
        return gpt.forward_slots(x, rope_at, cache, write_at, attend, live=live)
    first, second = slice(0, rows // 2), slice(rows // 2, rows)

    def blocks(part: slice) -> layer_ops.Blocks:
        return gpt.slot_blocks(x[part], rope_at[part], cache.rows(part.start, part.stop - part.start),
                               write_at[part], attend, live[part])

    first_blocks = blocks(first)
    next(first_blocks)  # the first half's first attention block: the second half starts behind it
    side = _side_stream(x.device)
    with forked(side):
        with torch.cuda.stream(side):  # its inputs made there too: nothing it reads is freed here
            second_half = layer_ops.run_blocks(blocks(second))
        first_half = layer_ops.run_blocks(first_blocks)
    return torch.cat([first_half, second_half])  # after the join


def _side_stream(device: torch.device) -> torch.cuda.Stream | None:
    """The halves' side stream on CUDA, at the current stream's priority (``step_graphs.URGENT_STEPS``:
    a captured kernel keeps its stream's); None elsewhere."""
    if device.type != "cuda":
        return None
    return kept_stream("step half", device, torch.cuda.current_stream(device).priority)

"""A decode step's GPT as two halves of its rows on two CUDA streams, the second half one block
behind the first, so that one half's GEMMs can run beside the other's attention.

Why: at ~1,000 rows a step is bound both by the int8 cache's bytes (its attention: 1.1-1.3 ms of
an H100's 2.7-ms step even at the copy ceiling) and by the tensor cores (the projections and the
MLP: ~0.4 TFLOP a step at 1,024 rows, 0.4 ms or more), and one stream runs them one after the other. Two independent
halves in one graph let the GPU overlap them; starting the second half after the first half's
first attention block keeps the halves out of step (in step, both would read the cache at once,
then both multiply). Off by default (``TTS_JOBS_STEP_HALVES=1``, ``EngineTuning.step_halves``)
until a device call measures it against the whole step; on the CPU the halves run one after the
other with the same results, which is what the tests hold it to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from pipeline.engine.gpt import FusedLlama
from pipeline.engine.kv_cache import SlotCache
from pipeline.engine.layer_ops import run_blocks

ON = False  # EngineTuning.step_halves (loading.apply_tuning)
HALVES_FROM = 256  # fewer rows run whole: halves of a few rows have nothing to overlap
_side_streams: dict[torch.device, torch.cuda.Stream] = {}


def forward_slots(gpt: FusedLlama, x: torch.Tensor, rope_at: torch.Tensor, cache: SlotCache,
                  write_at: torch.Tensor, attend: int, live: torch.Tensor) -> torch.Tensor:
    """``gpt.forward_slots`` over the first B slots, in two halves where ``ON`` and B is large."""
    rows = x.shape[0]
    if not ON or rows < HALVES_FROM:
        return gpt.forward_slots(x, rope_at, cache, write_at, attend, live=live)
    split = rows // 2
    first, second = (gpt.slot_blocks(x[part], rope_at[part], cache.rows(part.start, part.stop - part.start),
                                      write_at[part], attend, live[part])
                     for part in (slice(0, split), slice(split, rows)))
    next(first)  # the first half's first attention block: the second half starts behind it
    with _beside(x.device):
        second_half = run_blocks(second)
    return torch.cat([run_blocks(first), second_half])  # after the second half (``_beside``)


@contextlib.contextmanager
def _beside(device: torch.device) -> Iterator[None]:
    """On CUDA, the work launched inside on a side stream that starts after everything queued on
    the current one so far, which waits for it on leaving (a fork and a join, also inside a graph
    capture); elsewhere nothing changes."""
    if device.type != "cuda":
        yield
        return
    current = torch.cuda.current_stream(device)
    side = _side_streams.get(device)
    if side is None:  # one for good: each new torch.cuda.Stream is another of the pool's 32
        side = _side_streams[device] = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        yield
    current.wait_stream(side)

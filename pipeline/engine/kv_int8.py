"""The int8 KV cache of the decode slots: every (slot, head, position) vector of keys or values is
stored as int8 with one half-precision scale, its largest magnitude / 127 rounded to fp16.

Why: a decode step's attention reads each live slot's whole cache — pure memory traffic, most of
a step on the H200 (docs/engine.md) — so halving those bytes (plus 2 bytes of scale per 64) takes
a large share off every step. Why an fp16 scale, not float32: the scale was 4 of every 68 bytes
read; fp16 keeps it to 2^-11 relative, and the codes are computed with the rounded scale, so
what is stored reconstructs as well as before (the largest element's quotient is at most
127 * (1 + 2^-11), which rounds to 127); a step is never below fp16's smallest normal number,
2^-14 (a vector of zeros, or one smaller than 127 * 2^-14, gets that step).

Why int8 with a scale per vector rather than fp8 (e4m3): every vector keeps 7 bits of resolution
relative to its own largest element, where e4m3 keeps 3 mantissa bits per element; and int8
converts on any GPU and under Triton's CPU interpreter.

The Triton kernels that write the cache on the GPU make the scale and round the codes as
``quantize`` does here (``attention_block.int8_step``, ``int8_codes``: half away from zero).
"""

from __future__ import annotations

import torch

LEVELS = 127.0
SCALE_DTYPE = torch.float16  # the scales' format, in memory and as the kernels round them
SMALLEST_STEP = 2.0**-14  # fp16's smallest normal number: no vector gets a smaller scale (nor 0)


def quantize(x: torch.Tensor, levels: float = LEVELS) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [..., D] -> (int8 [..., D], fp16 scales [...]) with x ≈ q * scale, q in
    [-levels, levels] (fewer than 127 only to measure what a narrower cache would cost:
    ``python -m pipeline.bench formats``)."""
    x = x.float()
    scale = (x.abs().amax(-1) / levels).clamp_min(SMALLEST_STEP).to(SCALE_DTYPE)
    scaled = x / scale.float().unsqueeze(-1)
    rounded = (scaled + torch.where(scaled >= 0, 0.5, -0.5)).trunc()
    return rounded.clamp(-levels, levels).to(torch.int8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Back to ``dtype``: q [..., D] * scale [...]."""
    return (q.float() * scale.float().unsqueeze(-1)).to(dtype)


def scale_bytes() -> int:
    """Bytes of one vector's scale."""
    return torch.finfo(SCALE_DTYPE).bits // 8

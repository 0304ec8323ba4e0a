"""The int8 KV cache of the decode slots: every (slot, head, position) vector of keys or values is
stored as int8 with one float32 scale, its largest magnitude / 127.

Why: a decode step's attention reads each live slot's whole cache — pure memory traffic, most of
a step on the H200 (docs/engine.md) — so halving those bytes (plus 4 bytes of scale per 64) takes
a large share off every step. Why int8 with a scale per vector rather than fp8 (e4m3): every
vector keeps 7 bits of resolution relative to its own largest element, where e4m3 keeps 3
mantissa bits per element; and int8 converts on any GPU and under Triton's CPU interpreter.

The Triton kernel that writes the cache on the GPU (``decode_attention.rope_and_store``) rounds
the same way as ``quantize`` here: half away from zero.
"""

from __future__ import annotations

import torch

LEVELS = 127.0
TINY = 1e-20  # an all-zero vector gets this scale instead of 0 (0/0 would be NaN)


def quantize(x: torch.Tensor, levels: float = LEVELS) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [..., D] -> (int8 [..., D], float32 scales [...]) with x ≈ q * scale, q in
    [-levels, levels] (fewer than 127 only to measure what a narrower cache would cost:
    ``python -m pipeline.bench formats``)."""
    x = x.float()
    scale = x.abs().amax(-1).clamp_min(TINY) / levels
    scaled = x / scale.unsqueeze(-1)
    rounded = (scaled + torch.where(scaled >= 0, 0.5, -0.5)).trunc()
    return rounded.clamp(-levels, levels).to(torch.int8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Back to ``dtype``: q [..., D] * scale [...]."""
    return (q.float() * scale.unsqueeze(-1)).to(dtype)

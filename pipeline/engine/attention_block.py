"""One block of a slot's cached positions into a decode query's online softmax: the step that the
single-program kernel (``decode_attention.py``) and the split one (``split_attention.py``) repeat
along a slot's context. Keys and values are read as [BLOCK_N, D] blocks (D contiguous: vectorised
loads); an int8 cache's scales multiply a key's score and a value's weight (no dequantized copy).
``EXP2``: scores are in base 2 (log2(e) folded into the query's scale by the caller). Imported
only where Triton is (by those kernels' modules)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used, dims,
                 best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                 EXP2: tl.constexpr):
    """Positions [start, start + BLOCK_N) below ``used``: the new (best score, weight sum,
    weighted values)."""
    positions = start + tl.arange(0, BLOCK_N)
    inside = positions < used
    offsets = base + positions[:, None] * stride_kp + dims[None, :]
    keys = tl.load(k_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
    values = tl.load(v_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
    scores = tl.sum(keys * q[None, :], 1)
    if QUANTIZED:
        scores *= tl.load(ks_ptr + scale_base + positions, mask=inside, other=0.0)
    scores = tl.where(inside, scores, float("-inf"))
    new_best = tl.maximum(best, tl.max(scores, 0))
    if EXP2:
        rescale = tl.exp2(best - new_best)
        weights = tl.exp2(scores - new_best)
    else:
        rescale = tl.exp(best - new_best)
        weights = tl.exp(scores - new_best)
    total = total * rescale + tl.sum(weights, 0)
    if QUANTIZED:
        weights *= tl.load(vs_ptr + scale_base + positions, mask=inside, other=0.0)
    acc = acc * rescale + tl.sum(weights[:, None] * values, 0)
    return new_best, total, acc

"""One block of a slot's cached positions into a decode query's online softmax: the step that the
single-program kernel (``decode_attention.py``) and the split one (``split_attention.py``) repeat
along a slot's context. Keys and values are read as [BLOCK_N, D] blocks (D contiguous: vectorised
loads); an int8 cache's scales multiply a key's score and a value's weight (no dequantized copy).
``EXP2``: scores are in base 2 (log2(e) folded into the query's scale by the caller). Imported
only where Triton is (by those kernels' modules). Also what every kernel that writes the cache
shares: RoPE on a head's vector, its scale and its int8 codes (``rotated``, ``int8_step``,
``int8_codes``), and the RMSNorm factor of the residual row it was projected from (``rms_scale``,
``normed_qkv``)."""

from __future__ import annotations

import triton
import triton.language as tl

from pipeline.engine.kv_int8 import LEVELS as _KV_LEVELS
from pipeline.engine.kv_int8 import SMALLEST_STEP as _KV_SMALLEST_STEP

# kv_int8's format, as the kernels see it (a Triton function reads module globals only as constexprs)
LEVELS = tl.constexpr(_KV_LEVELS)
SMALLEST_STEP = tl.constexpr(_KV_SMALLEST_STEP)


@triton.jit
def rotated(x_ptr, dims, partner, sign, cos, sin):
    """RoPE on one head's vector (rotate_half: ``partner`` the other half, ``sign`` -1 on the first),
    in float32, from the cos and sin table rows already loaded."""
    x = tl.load(x_ptr + dims).to(tl.float32)
    return x * cos + sign * tl.load(x_ptr + partner).to(tl.float32) * sin


@triton.jit
def rms_scale(x_ptr, width, eps, BLOCK: tl.constexpr):
    """1 / RMS of a residual row (its ``width`` values from ``x_ptr``; BLOCK a power of 2 >= width),
    in float32: what RMSNorm multiplies the row by. A projection of the raw row by weights that
    hold the norm's own (gpt.py folds them in), times this, is the projection of the normalised
    row: the kernel that reads the projection normalises it, and no kernel of its own does."""
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < width, other=0.0).to(tl.float32)
    return tl.rsqrt(tl.sum(x * x, 0) / width + eps)


@triton.jit
def normed_qkv(source, x_ptr, eps, dims, partner, sign, cos, sin, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
               BLOCK_X: tl.constexpr):
    """One head's q and k (RoPE'd) and v from a fused qkv projection row at ``source`` of the raw
    residual row at ``x_ptr``, each times that row's RMSNorm factor (``rms_scale``), in float32:
    what every kernel that takes a decode step's projection starts with."""
    norm = rms_scale(x_ptr, HEADS * HEAD_DIM, eps, BLOCK_X)
    q = rotated(source, dims, partner, sign, cos, sin) * norm
    k = rotated(source + HEADS * HEAD_DIM, dims, partner, sign, cos, sin) * norm
    v = tl.load(source + 2 * HEADS * HEAD_DIM + dims).to(tl.float32) * norm
    return q, k, v


@triton.jit
def int8_step(largest):
    """A vector's scale from its largest magnitude, as kv_int8.quantize makes it: / 127, at least
    fp16's smallest normal number, rounded to fp16 (kv_int8.SCALE_DTYPE), in float32."""
    return tl.maximum(largest / LEVELS, SMALLEST_STEP).to(tl.float16).to(tl.float32)


@triton.jit
def int8_codes(scaled):
    """Rounded half away from zero and clamped to [-127, 127], as kv_int8.quantize does (int32)."""
    rounded = (scaled + tl.where(scaled >= 0, 0.5, -0.5)).to(tl.int32)
    return tl.minimum(tl.maximum(rounded, -127), 127)


@triton.jit
def int8_as_float(codes):
    """int8 codes as float32 without the integer-to-float conversion instruction, which the H100
    and H200 issue at a fraction of their fp32 rate (the CUDA guide's throughput table): the code
    plus 128 put under the exponent of 2**23 by an integer add and an or, then 2**23 + 128 taken
    away by one float subtraction. Exact for -128..127."""
    bits = (codes.to(tl.int32) + 128) | 0x4B000000
    return bits.to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used, dims,
                 best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                 EXP2: tl.constexpr, INT8_BITS: tl.constexpr):
    """Positions [start, start + BLOCK_N) below ``used``: the new (best score, weight sum,
    weighted values). ``INT8_BITS``: an int8 cache's codes made floats by ``int8_as_float``."""
    positions = start + tl.arange(0, BLOCK_N)
    inside = positions < used
    offsets = base + positions[:, None] * stride_kp + dims[None, :]
    if QUANTIZED and INT8_BITS:
        keys = int8_as_float(tl.load(k_ptr + offsets, mask=inside[:, None], other=0))
        values = int8_as_float(tl.load(v_ptr + offsets, mask=inside[:, None], other=0))
    else:
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

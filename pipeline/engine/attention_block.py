"""One block of a slot's cached positions into a decode query's online softmax: the step that the
single-program kernel (``decode_attention.py``) and the split one (``split_attention.py``) repeat
along a slot's context. Keys and values are read as [BLOCK_N, D] blocks (D contiguous: vectorised
loads); an int8 cache's scales multiply a key's score and a value's weight (no dequantized copy).
``EXP2``: scores are in base 2 (log2(e) folded into the query's scale by the caller). The
single-program kernel may instead keep its sums per position of a block and reduce them once at
the slot's end (``attend_block_deferred``, ``decode_attention.REDUCE``). Imported only where
Triton is (by those kernels' modules)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def int8_as_float(codes):
    """int8 codes as float32 without the integer-to-float conversion instruction, which the H100
    and H200 issue at a fraction of their fp32 rate (the CUDA guide's throughput table): the code
    plus 128 put under the exponent of 2**23 by an integer add and an or, then 2**23 + 128 taken
    away by one float subtraction. Exact for -128..127."""
    bits = (codes.to(tl.int32) + 128) | 0x4B000000
    return bits.to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def load_block(k_ptr, v_ptr, base, stride_kp, start, used, dims, QUANTIZED: tl.constexpr,
               BLOCK_N: tl.constexpr, INT8_BITS: tl.constexpr):
    """Positions [start, start + BLOCK_N), whether each is below ``used``, and their keys and
    values as float32 [BLOCK_N, D] (0 past ``used``). ``INT8_BITS``: an int8 cache's codes made
    floats by ``int8_as_float``."""
    positions = start + tl.arange(0, BLOCK_N)
    inside = positions < used
    offsets = base + positions[:, None] * stride_kp + dims[None, :]
    if QUANTIZED and INT8_BITS:
        keys = int8_as_float(tl.load(k_ptr + offsets, mask=inside[:, None], other=0))
        values = int8_as_float(tl.load(v_ptr + offsets, mask=inside[:, None], other=0))
    else:
        keys = tl.load(k_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
        values = tl.load(v_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
    return positions, inside, keys, values


@triton.jit
def attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used, dims,
                 best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                 EXP2: tl.constexpr, INT8_BITS: tl.constexpr):
    """Positions [start, start + BLOCK_N) below ``used``: the new (best score, weight sum,
    weighted values), each summed over the block's positions."""
    positions, inside, keys, values = load_block(k_ptr, v_ptr, base, stride_kp, start, used, dims,
                                                 QUANTIZED, BLOCK_N, INT8_BITS)
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


@triton.jit
def attend_block_deferred(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used,
                          dims, best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                          INT8_BITS: tl.constexpr, LANES: tl.constexpr):
    """``attend_block`` with its sums over positions left to the end of the slot (``finish_deferred``):
    ``total`` [BLOCK_N] and ``acc`` [BLOCK_N, D] keep one partial sum per position of a block, so
    a block's step is elementwise where the summing one reduces D sums across the lanes that hold
    its positions. ``LANES``: ``best`` [BLOCK_N] too, one online softmax per lane (no reduction
    at all until the end); else ``best`` is the slot's (one maximum a block). Scores in base e;
    ``best`` starts at -1e30, not -inf (a lane that has seen only masked positions rescales by 1)."""
    positions, inside, keys, values = load_block(k_ptr, v_ptr, base, stride_kp, start, used, dims,
                                                 QUANTIZED, BLOCK_N, INT8_BITS)
    scores = tl.sum(keys * q[None, :], 1)
    if QUANTIZED:
        scores *= tl.load(ks_ptr + scale_base + positions, mask=inside, other=0.0)
    scores = tl.where(inside, scores, float("-inf"))
    if LANES:
        new_best = tl.maximum(best, scores)
    else:
        new_best = tl.maximum(best, tl.max(scores, 0))
    rescale = tl.exp(best - new_best)
    weights = tl.exp(scores - new_best)
    total = total * rescale + weights
    if QUANTIZED:
        weights *= tl.load(vs_ptr + scale_base + positions, mask=inside, other=0.0)
    if LANES:
        acc = acc * rescale[:, None] + weights[:, None] * values
    else:
        acc = acc * rescale + weights[:, None] * values
    return new_best, total, acc


# The single kernel's ways of summing a slot's positions (``decode_attention.REDUCTIONS``): 0
# ``attend_block``, 1 ``attend_block_deferred``, 2 the same with ``LANES``.


@triton.jit
def empty_state(BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, REDUCE: tl.constexpr):
    """(best score, weight sum, weighted values) before a slot's first block."""
    if REDUCE == 0:
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc = tl.zeros([HEAD_DIM], tl.float32)
    else:
        if REDUCE == 2:
            best = tl.full([BLOCK_N], -1e30, tl.float32)
        else:
            best = tl.max(tl.full([BLOCK_N], -1e30, tl.float32), 0)
        total = tl.zeros([BLOCK_N], tl.float32)
        acc = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    return best, total, acc


@triton.jit
def attend_next(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used, dims,
                best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                INT8_BITS: tl.constexpr, REDUCE: tl.constexpr):
    """The next block into the state, summed the ``REDUCE`` way (scores in base e)."""
    if REDUCE == 0:
        best, total, acc = attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp,
                                        start, used, dims, best, total, acc, QUANTIZED, BLOCK_N, False,
                                        INT8_BITS)
    else:
        best, total, acc = attend_block_deferred(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base,
                                                 stride_kp, start, used, dims, best, total, acc,
                                                 QUANTIZED, BLOCK_N, INT8_BITS, REDUCE == 2)
    return best, total, acc


@triton.jit
def finish_state(best, total, acc, REDUCE: tl.constexpr):
    """The attention output [D] from the state after a slot's last block (the deferred partial
    sums summed; with lanes, their softmaxes first brought to one maximum)."""
    if REDUCE == 0:
        out = acc / total
    elif REDUCE == 2:
        shift = tl.exp(best - tl.max(best, 0))
        out = tl.sum(acc * shift[:, None], 0) / tl.sum(total * shift, 0)
    else:
        out = tl.sum(acc, 0) / tl.sum(total, 0)
    return out

"""The decode attention kernel with a group of a slot's heads in one program: the same online
softmax as ``decode_attention.py``'s single-program kernel, each head's keys and values read once,
over [group, BLOCK_N, D] blocks.

Why: the single-program kernel gives each (slot, head) one program of one warp (the sweep's
best), and an SM keeps at most 32 programs resident, so 32 of its 64 warps: half the loads a full
SM could have in flight, on a step that is pure memory traffic (its int8 kernel read 2.28 TB/s of
the H200's ~4.3). A program of ``group`` heads keeps ``group`` times the loads in flight per
program. The slot's length is the same for all its heads, so they share the loop. Chosen by
``decode_attention.HEADS_PER_PROGRAM`` (a divisor of the head count, a power of two). It repeats
``attention_block.attend_block``'s online softmax over one more axis; if the sweep finds it
faster, it replaces the single-program kernel (a group of 1 is that kernel's shape) rather than
living beside it. Imported only where Triton is.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def attend_heads_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp, start, used, dims,
                       best, total, acc, QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr):
    """Positions [start, start + BLOCK_N) below ``used`` for every head of the group (``base``,
    ``scale_base``: [group]): the new (best scores, weight sums [group], weighted values [group, D])."""
    positions = start + tl.arange(0, BLOCK_N)
    inside = positions < used
    offsets = base[:, None, None] + positions[None, :, None] * stride_kp + dims[None, None, :]
    keys = tl.load(k_ptr + offsets, mask=inside[None, :, None], other=0).to(tl.float32)
    values = tl.load(v_ptr + offsets, mask=inside[None, :, None], other=0).to(tl.float32)
    scores = tl.sum(keys * q[:, None, :], 2)
    scale_at = scale_base[:, None] + positions[None, :]
    if QUANTIZED:
        scores *= tl.load(ks_ptr + scale_at, mask=inside[None, :], other=0.0)
    scores = tl.where(inside[None, :], scores, float("-inf"))
    new_best = tl.maximum(best, tl.max(scores, 1))
    rescale = tl.exp(best - new_best)
    weights = tl.exp(scores - new_best[:, None])
    total = total * rescale + tl.sum(weights, 1)
    if QUANTIZED:
        weights *= tl.load(vs_ptr + scale_at, mask=inside[None, :], other=0.0)
    acc = acc * rescale[:, None] + tl.sum(weights[:, :, None] * values, 1)
    return new_best, total, acc


@triton.jit
def _head_group_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                       stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                       stride_sb, stride_sh, stride_ob, stride_oh,
                       QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                       GROUP: tl.constexpr):
    row = tl.program_id(0)
    heads = tl.program_id(1) * GROUP + tl.arange(0, GROUP)
    used = tl.load(used_ptr + row)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + row * stride_qb + heads[:, None] * stride_qh + dims[None, :]).to(tl.float32) * scale
    base = row * stride_kb + heads * stride_kh
    scale_base = row * stride_sb + heads * stride_sh
    best = tl.full([GROUP], float("-inf"), tl.float32)
    total = tl.zeros([GROUP], tl.float32)
    acc = tl.zeros([GROUP, HEAD_DIM], tl.float32)
    start = 0
    while start < used:  # up to the slot's own length (as the single-program kernel, for the interpreter)
        best, total, acc = attend_heads_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp,
                                              start, used, dims, best, total, acc, QUANTIZED, BLOCK_N)
        start += BLOCK_N
    out = acc / total[:, None]
    tl.store(o_ptr + row * stride_ob + heads[:, None] * stride_oh + dims[None, :], out.to(o_ptr.dtype.element_ty))


def head_group_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, used: torch.Tensor,
                         key_scales: torch.Tensor, value_scales: torch.Tensor, quantized: bool,
                         group: int, block: int, warps: int) -> torch.Tensor:
    """``decode_attention``'s contract (its scales or placeholders from ``_scales``), ``group``
    heads a program."""
    rows, heads, dim = query.shape
    if heads % group or group & (group - 1):
        raise ValueError(f"{group} heads a program: it must be a power of two dividing {heads}")
    out = torch.empty_like(query)
    _head_group_kernel[(rows, heads // group)](
        query, keys, values, key_scales, value_scales, out, used, 1.0 / math.sqrt(dim),
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        QUANTIZED=quantized, BLOCK_N=block, HEAD_DIM=dim, GROUP=group, num_warps=warps)
    return out

"""The decode step's attention on the GPU, in two Triton kernels: RoPE + cache write, then one query
per slot over that slot's own cache prefix.

A decode step's attention is one query row per (slot, head) against up to a few hundred cached
positions: pure memory traffic. The library kernels pad the query to a 64- or 128-row tile and
spend their time on masked-out products (SDPA's memory-efficient kernel and FlashAttention's
variable-length one both reached only ~1.6 TB/s of the H200's ~4.3 on this shape, ~75 % of a
step; docs/engine.md). This Triton kernel gives each (slot, head) one program that streams the
slot's keys and values once, with an online softmax in float32, and stops at the slot's length.
Before it, ``rope_and_store`` replaces the ~7 small kernels per layer that rotated q and k on
strided views and scattered k and v into the cache.

Only on CUDA (Triton ships with CUDA builds of PyTorch); ``gpt.py`` uses masked SDPA elsewhere.
"""

from __future__ import annotations

import math

import torch

try:  # pragma: no cover - exercised on the GPU machine (and under TRITON_INTERPRET=1)
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of PyTorch
    triton = None
    tl = None


def available() -> bool:
    return triton is not None


if triton is not None:  # pragma: no cover

    @triton.jit
    def _decode_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, used_ptr, scale,
                                 stride_qb, stride_qh, stride_kb, stride_kp, stride_kh,
                                 stride_ob, stride_oh,
                                 BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        used = tl.load(used_ptr + row)
        dims = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims).to(tl.float32) * scale
        base = row * stride_kb + head * stride_kh
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc = tl.zeros([HEAD_DIM], tl.float32)
        # a while loop up to the slot's own length: one compiled kernel for every length (a
        # ``range`` over a loaded bound is not supported by Triton's CPU interpreter, which the
        # tests run this kernel under)
        start = 0
        while start < used:
            positions = start + tl.arange(0, BLOCK_N)
            inside = positions < used
            offsets = base + positions[:, None] * stride_kp + dims[None, :]
            keys = tl.load(k_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
            scores = tl.where(inside, tl.sum(keys * q[None, :], 1), float("-inf"))
            new_best = tl.maximum(best, tl.max(scores, 0))
            rescale = tl.exp(best - new_best)
            weights = tl.exp(scores - new_best)
            values = tl.load(v_ptr + offsets, mask=inside[:, None], other=0.0).to(tl.float32)
            acc = acc * rescale + tl.sum(weights[:, None] * values, 0)
            total = total * rescale + tl.sum(weights, 0)
            best = new_best
            start += BLOCK_N
        out = acc / total
        tl.store(o_ptr + row * stride_ob + head * stride_oh + dims, out.to(o_ptr.dtype.element_ty))


if triton is not None:  # pragma: no cover

    @triton.jit
    def _rope_and_store_kernel(qkv_ptr, cos_ptr, sin_ptr, k_cache_ptr, v_cache_ptr, at_ptr, q_ptr,
                               stride_qkv_b, stride_cos_b, stride_cache_b, stride_cache_p,
                               stride_cache_h, stride_q_b, stride_q_h,
                               HEADS: tl.constexpr, HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        half: tl.constexpr = HEAD_DIM // 2
        dims = tl.arange(0, HEAD_DIM)
        partner = (dims + half) % HEAD_DIM  # rotate_half: [-x2, x1]
        sign = tl.where(dims < half, -1.0, 1.0)
        cos = tl.load(cos_ptr + row * stride_cos_b + dims)
        sin = tl.load(sin_ptr + row * stride_cos_b + dims)
        base = qkv_ptr + row * stride_qkv_b + head * HEAD_DIM
        q = tl.load(base + dims).to(tl.float32)
        q_partner = tl.load(base + partner).to(tl.float32)
        k = tl.load(base + HEADS * HEAD_DIM + dims).to(tl.float32)
        k_partner = tl.load(base + HEADS * HEAD_DIM + partner).to(tl.float32)
        v = tl.load(base + 2 * HEADS * HEAD_DIM + dims)
        q_rot = q * cos + sign * q_partner * sin
        k_rot = k * cos + sign * k_partner * sin
        at = tl.load(at_ptr + row)
        slot = row * stride_cache_b + at * stride_cache_p + head * stride_cache_h + dims
        tl.store(k_cache_ptr + slot, k_rot.to(k_cache_ptr.dtype.element_ty))
        tl.store(v_cache_ptr + slot, v)
        tl.store(q_ptr + row * stride_q_b + head * stride_q_h + dims,
                 q_rot.to(q_ptr.dtype.element_ty))


def rope_and_store(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor,
                   values: torch.Tensor, write_at: torch.Tensor) -> torch.Tensor:
    """One decode position of B slots in one kernel: RoPE on q and k (float32 tables cos/sin
    [B, D]), k and v written into the caches [N, P, H, D] at each slot's ``write_at``.
    ``qkv`` is the fused projection's output [B, 3 * H * D]; returns the rotated queries [B, H, D]."""
    rows = qkv.shape[0]
    heads, dim = keys.shape[2], keys.shape[3]
    query = torch.empty(rows, heads, dim, dtype=qkv.dtype, device=qkv.device)
    _rope_and_store_kernel[(rows, heads)](
        qkv, cos, sin, keys, values, write_at, query,
        qkv.stride(0), cos.stride(0), keys.stride(0), keys.stride(1), keys.stride(2),
        query.stride(0), query.stride(1), HEADS=heads, HEAD_DIM=dim, num_warps=1)
    return query


def decode_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                     used: torch.Tensor, block: int = 64) -> torch.Tensor:
    """query [B, H, D]; keys/values [B, P, H, D] (the slots' caches, D contiguous); used [B]
    int32: positions [0, used) of each slot are attended to. Returns [B, H, D]."""
    rows, heads, dim = query.shape
    out = torch.empty_like(query)
    _decode_attention_kernel[(rows, heads)](
        query, keys, values, out, used, 1.0 / math.sqrt(dim),
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        out.stride(0), out.stride(1), BLOCK_N=block, HEAD_DIM=dim, num_warps=4)
    return out

"""A candidate rewrite of the engine's decode attention (``pipeline/engine/decode_attention.py``),
kept here to be measured against the engine's own kernels, never used by the engine: the query
broadcast to 16 rows so that the scores and the value sum run on tensor cores (``tl.dot``, fp16),
and optionally the scores as an int8 x int8 product (the query quantized per (slot, head)).

It keeps the engine kernel's contract: one program per (slot, head), an online softmax, stopping
at the slot's length, int8 caches with their per-position scales."""

from __future__ import annotations

import math

import torch

from pipeline.engine.triton_import import tl, triton

LOG2E = 1.4426950408889634

if triton is not None:

    @triton.jit
    def _dot_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                    stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                    stride_sb, stride_sh, stride_ob, stride_oh,
                    INT8_SCORES: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        used = tl.load(used_ptr + row)
        dims = tl.arange(0, HEAD_DIM)
        lanes = tl.arange(0, 16)  # tensor cores take 16 rows: the one query, repeated
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims[None, :] + 0 * lanes[:, None]).to(tl.float32)
        if INT8_SCORES:
            q_step = tl.maximum(tl.max(tl.abs(q), 1), 1e-20) / 127.0
            rounded = q / q_step[:, None]
            q_codes = (rounded + tl.where(rounded >= 0, 0.5, -0.5)).to(tl.int32).to(tl.int8)
            score_scale = q_step * scale
        else:
            q_codes = (q * scale).to(tl.float16)
        base = row * stride_kb + head * stride_kh
        scale_base = row * stride_sb + head * stride_sh
        best = tl.full([16], float("-inf"), tl.float32)
        total = tl.zeros([16], tl.float32)
        acc = tl.zeros([16, HEAD_DIM], tl.float32)
        start = 0
        while start < used:
            positions = start + tl.arange(0, BLOCK_N)
            inside = positions < used
            offsets = base + positions[:, None] * stride_kp + dims[None, :]
            keys = tl.load(k_ptr + offsets, mask=inside[:, None], other=0)
            values = tl.load(v_ptr + offsets, mask=inside[:, None], other=0)
            if INT8_SCORES:
                scores = tl.dot(q_codes, tl.trans(keys)).to(tl.float32) * score_scale[:, None]
            else:
                scores = tl.dot(q_codes, tl.trans(keys.to(tl.float16)))
            scores *= tl.load(ks_ptr + scale_base + positions, mask=inside, other=0.0)[None, :]
            scores = tl.where(inside[None, :], scores, float("-inf"))
            new_best = tl.maximum(best, tl.max(scores, 1))
            rescale = tl.exp2(best - new_best)
            weights = tl.exp2(scores - new_best[:, None])
            total = total * rescale + tl.sum(weights, 1)
            weights *= tl.load(vs_ptr + scale_base + positions, mask=inside, other=0.0)[None, :]
            acc = acc * rescale[:, None] + tl.dot(weights.to(tl.float16), values.to(tl.float16))
            best = new_best
            start += BLOCK_N
        out = acc / total[:, None]
        tl.store(o_ptr + row * stride_ob + head * stride_oh + dims[None, :] + 0 * lanes[:, None],
                 out.to(o_ptr.dtype.element_ty), mask=(lanes == 0)[:, None])


def dot_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, used: torch.Tensor,
                  key_scales: torch.Tensor, value_scales: torch.Tensor, *, int8_scores: bool,
                  block: int, warps: int) -> torch.Tensor:
    """The tensor-core candidate over an int8 cache; the engine's ``decode_attention`` arguments."""
    rows, heads, dim = query.shape
    out = torch.empty_like(query)
    _dot_kernel[(rows, heads)](
        query, keys, values, key_scales, value_scales, out, used, LOG2E / math.sqrt(dim),
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        INT8_SCORES=int8_scores, BLOCK_N=block, HEAD_DIM=dim, num_warps=warps)
    return out

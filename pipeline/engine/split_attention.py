"""Split-K ("flash-decoding") decode attention: each (slot, head) context cut into partitions of
``PARTITION`` positions, each partition its own Triton program, then a small reduce kernel that
combines the partial maxima, sums and value accumulators.

Why: with one program per (slot, head) (``decode_attention.py``) each program walks its whole
context in a serial chain of dependent loads and rescales; at ~1,000 live rows and a few hundred
positions the H200 then reads the int8 cache at ~30 % of its copy bandwidth. Partitions give
every (slot, head) several independent programs, so many more loads are in flight and each chain
is short. The price is a second, tiny kernel and float32 partials of [B, H, partitions, D + 2]
per call.

The int8 path reads keys and values as int8 blocks [BLOCK, D] (contiguous D, aligned: the loads
are vectorised) and never makes a dequantized copy: a key's scale multiplies its score, a value's
scale its softmax weight. The exponent is base 2 with log2(e) folded into the query's scale.

The grid has ``min(partitions of the cache's capacity, MAX_SPLITS)`` programs per (slot, head),
whatever the slot's length, so one launch shape (a CUDA graph) serves every length; program p
takes partitions p, p + splits, p + 2 * splits, ... below the slot's ``used`` positions (a worker's
slots hold 2,304 positions for sentences of a few hundred: a program per partition of the
capacity would mostly start and stop). Programs past ``used`` store an empty partial (max -inf,
sum 0) and the reduce skips them.
"""

from __future__ import annotations

import math

import torch

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover - the shared blocks are Triton code
    from pipeline.engine.attention_block import attend_block

PARTITION = 64  # positions per partition (the GPU check sweeps 64 / 128 / 256)
MAX_SPLITS = 8  # programs per (slot, head) at most
BLOCK = 32  # positions per loop iteration inside a partition
WARPS = 1
LOG2E = 1.4426950408889634


if triton is not None:  # pragma: no cover

    @triton.jit
    def _partition_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, used_ptr, best_ptr, total_ptr,
                          acc_ptr, scale, stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                          stride_sb, stride_sh, QUANTIZED: tl.constexpr,
                          PARTITION_N: tl.constexpr, BLOCK_N: tl.constexpr,
                          HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        part = tl.program_id(2)
        parts = tl.num_programs(2)
        used = tl.load(used_ptr + row)
        dims = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims).to(tl.float32) * scale
        base = row * stride_kb + head * stride_kh
        scale_base = row * stride_sb + head * stride_sh
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc = tl.zeros([HEAD_DIM], tl.float32)
        start = part * PARTITION_N
        # a while loop (Triton's CPU interpreter takes no range over a load), block by block
        # through this program's partitions: at each partition's end it jumps over the others'
        while start < used:
            best, total, acc = attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base, stride_kp,
                                            start, used, dims, best, total, acc, QUANTIZED, BLOCK_N, True,
                                            False)  # the conversion instruction (decode_attention.INT8_BITS)
            start += BLOCK_N
            start = tl.where(start % PARTITION_N == 0, start + (parts - 1) * PARTITION_N, start)
        at = (row * tl.num_programs(1) + head) * parts + part
        tl.store(best_ptr + at, best)
        tl.store(total_ptr + at, total)
        tl.store(acc_ptr + at * HEAD_DIM + dims, acc)

    @triton.jit
    def _reduce_kernel(best_ptr, total_ptr, acc_ptr, used_ptr, o_ptr, parts,
                       stride_ob, stride_oh, PARTITION_N: tl.constexpr,
                       MAX_PARTS: tl.constexpr, HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        used = tl.load(used_ptr + row)
        dims = tl.arange(0, HEAD_DIM)
        numbers = tl.arange(0, MAX_PARTS)
        filled = numbers < tl.minimum((used + PARTITION_N - 1) // PARTITION_N, parts)
        at = (row * tl.num_programs(1) + head) * parts + numbers
        best = tl.load(best_ptr + at, mask=filled, other=float("-inf"))
        overall = tl.max(best, 0)
        weight = tl.where(filled, tl.exp2(best - overall), 0.0)
        total = tl.sum(tl.load(total_ptr + at, mask=filled, other=0.0) * weight, 0)
        acc = tl.load(acc_ptr + at[:, None] * HEAD_DIM + dims[None, :], mask=filled[:, None],
                      other=0.0)
        out = tl.sum(acc * weight[:, None], 0) / tl.maximum(total, 1.0)  # none filled: zeros
        tl.store(o_ptr + row * stride_ob + head * stride_oh + dims, out.to(o_ptr.dtype.element_ty))


def split_decode_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                           used: torch.Tensor, key_scales: torch.Tensor, value_scales: torch.Tensor,
                           quantized: bool, partition: int | None = None) -> torch.Tensor:
    """``decode_attention.decode_attention``'s contract, computed by partitions of ``partition``
    positions (default ``PARTITION``). Without int8, ``key_scales``/``value_scales`` are
    placeholders with [N, H, P] strides (never read). Returns [B, H, D] in the query's dtype."""
    rows, heads, dim = query.shape
    size, block = partition or PARTITION, min(BLOCK, partition or PARTITION)
    if size % block:
        raise ValueError(f"a partition of {size} positions is no whole number of {block}-position blocks")
    parts = min(triton.cdiv(keys.shape[2], size), MAX_SPLITS)
    # the partials, float32: maximum and sum [B, H, parts], value accumulator [B, H, parts, D]
    best = torch.empty(rows, heads, parts, dtype=torch.float32, device=query.device)
    total = torch.empty_like(best)
    acc = torch.empty(rows, heads, parts, dim, dtype=torch.float32, device=query.device)
    _partition_kernel[(rows, heads, parts)](
        query, keys, values, key_scales, value_scales, used, best, total, acc,
        LOG2E / math.sqrt(dim), query.stride(0), query.stride(1), keys.stride(0), keys.stride(1),
        keys.stride(2), key_scales.stride(0), key_scales.stride(1), QUANTIZED=quantized,
        PARTITION_N=size, BLOCK_N=block, HEAD_DIM=dim, num_warps=WARPS)
    out = torch.empty_like(query)
    _reduce_kernel[(rows, heads)](
        best, total, acc, used, out, parts, out.stride(0), out.stride(1), PARTITION_N=size,
        MAX_PARTS=max(2, triton.next_power_of_2(parts)), HEAD_DIM=dim, num_warps=1)
    return out

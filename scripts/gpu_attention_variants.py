"""The decode attention kernel against candidate rewrites, on the int8 cache a decode step reads:
µs per layer, TB/s over the bytes the slots' prefixes hold, and error against float32 attention
over the dequantized cache. Each candidate keeps the engine kernel's contract (one program per
(slot, head), online softmax, stops at the slot's length).

    python scripts/gpu_attention_variants.py --rows 1024 --attend 256 [--check]

Candidates:
  engine    pipeline/engine/decode_attention.py as it is
  deferred  the value sum kept per position ([BLOCK, D] accumulator), reduced once at the end;
            exp2 with log2(e) folded into the query scale
  dot       q broadcast to 16 rows, scores and the value sum on tensor cores (tl.dot, fp16)
  dot8      as dot, the scores an int8 x int8 product (q quantized per (slot, head))

--check runs small shapes only and prints errors (also under TRITON_INTERPRET=1 on a CPU).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.engine import decode_attention as engine_kernels  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_step_profile import _time as timed  # noqa: E402

LOG2E = 1.4426950408889634


@triton.jit
def _deferred_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                     stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                     stride_sb, stride_sh, stride_ob, stride_oh,
                     BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    row = tl.program_id(0)
    head = tl.program_id(1)
    used = tl.load(used_ptr + row)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims).to(tl.float32) * scale
    base = row * stride_kb + head * stride_kh
    scale_base = row * stride_sb + head * stride_sh
    best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
    total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
    acc = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    start = 0
    while start < used:
        positions = start + tl.arange(0, BLOCK_N)
        inside = positions < used
        offsets = base + positions[:, None] * stride_kp + dims[None, :]
        keys = tl.load(k_ptr + offsets, mask=inside[:, None], other=0).to(tl.float32)
        values = tl.load(v_ptr + offsets, mask=inside[:, None], other=0).to(tl.float32)
        scores = tl.sum(keys * q[None, :], 1) * tl.load(ks_ptr + scale_base + positions, mask=inside, other=0.0)
        scores = tl.where(inside, scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, 0))
        rescale = tl.exp2(best - new_best)
        weights = tl.exp2(scores - new_best)
        total = total * rescale + tl.sum(weights, 0)
        weights *= tl.load(vs_ptr + scale_base + positions, mask=inside, other=0.0)
        acc = acc * rescale + weights[:, None] * values
        best = new_best
        start += BLOCK_N
    out = tl.sum(acc, 0) / total
    tl.store(o_ptr + row * stride_ob + head * stride_oh + dims, out.to(o_ptr.dtype.element_ty))


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


def run_variant(name: str, query, keys, values, used, key_scales, value_scales, block: int, warps: int):
    if name == "engine":
        engine_kernels.BLOCK_POSITIONS, engine_kernels.WARPS = block, warps
        return engine_kernels.decode_attention(query, keys, values, used, key_scales, value_scales)
    rows, heads, dim = query.shape
    out = torch.empty_like(query)
    args = (query, keys, values, key_scales, value_scales, out, used, LOG2E / math.sqrt(dim),
            query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
            key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1))
    if name == "deferred":
        _deferred_kernel[(rows, heads)](*args, BLOCK_N=block, HEAD_DIM=dim, num_warps=warps)
    else:
        _dot_kernel[(rows, heads)](*args, INT8_SCORES=name == "dot8", BLOCK_N=block, HEAD_DIM=dim,
                                   num_warps=warps)
    return out


def reference(query, keys, values, used, key_scales, value_scales):
    k = keys.float() * key_scales[..., None]
    v = values.float() * value_scales[..., None]
    scores = torch.einsum("bhd,bhpd->bhp", query.float(), k) / math.sqrt(query.shape[-1])
    positions = torch.arange(keys.shape[2], device=keys.device)
    scores = scores.masked_fill(positions[None, None, :] >= used[:, None, None].long(), float("-inf"))
    return torch.einsum("bhp,bhpd->bhd", scores.softmax(-1), v)


def inputs(rows: int, attend: int, device, heads: int = 12, dim: int = 64, seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    used = torch.randint(attend // 4, attend + 1, (rows,), generator=generator, dtype=torch.int32)
    shape = (rows, heads, attend, dim)
    # keys with a few strong directions, as trained caches have: scores spread over several units
    query = (torch.randn(rows, heads, dim, generator=generator) * 2).half()
    keys = torch.randint(-127, 128, shape, generator=generator, dtype=torch.int8)
    values = torch.randint(-127, 128, shape, generator=generator, dtype=torch.int8)
    key_scales = torch.rand(shape[:3], generator=generator) / 100
    value_scales = torch.rand(shape[:3], generator=generator) / 40
    return [t.to(device) for t in (query, keys, values, used, key_scales, value_scales)]


VARIANTS = ("engine", "deferred", "dot", "dot8")


def check(device) -> None:
    tensors = inputs(4, 40, device)
    want = reference(*tensors)
    for name in VARIANTS:
        for block in (16, 32):
            got = run_variant(name, *tensors, block=block, warps=1).float()
            error = ((got - want).norm() / want.norm()).item()
            print(f"{name} block {block}: relative error {error:.2e}", flush=True)


def sweep(rows: int, attend: int) -> None:
    device = torch.device("cuda")
    tensors = inputs(rows, attend, device)
    query, keys, values, used = tensors[:4]
    want = reference(*tensors)
    heads, dim = query.shape[1], query.shape[2]
    byte_count = int(used.sum()) * heads * (2 * dim + 8)
    print(f"\n{rows} slots, lengths {attend // 4}..{attend}, one layer, int8 cache")
    print("| kernel | block | warps | µs | TB/s | relative error |")
    print("|---|---|---|---|---|---|")
    for name in VARIANTS:
        best = None
        for block in (16, 32, 64):
            for warps in (1, 2, 4):
                try:
                    got = run_variant(name, *tensors, block=block, warps=warps).float()
                    seconds = timed(lambda: run_variant(name, *tensors, block=block, warps=warps))
                except Exception as error:  # a shape this variant cannot compile
                    print(f"| {name} | {block} | {warps} | failed: {type(error).__name__} | | |")
                    continue
                error = ((got - want).norm() / want.norm()).item()
                print(f"| {name} | {block} | {warps} | {seconds * 1e6:.1f} | "
                      f"{byte_count / seconds / 1e12:.2f} | {error:.2e} |", flush=True)
                best = min(best or (seconds, block, warps), (seconds, block, warps))
        if best:
            print(f"BEST {name}: block {best[1]}, {best[2]} warps, {best[0] * 1e6:.1f} µs", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[1024])
    parser.add_argument("--attend", type=int, nargs="+", default=[256])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        check(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        return 0
    for rows in args.rows:
        for attend in args.attend:
            sweep(rows, attend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

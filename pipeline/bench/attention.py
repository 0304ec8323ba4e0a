"""The engine's decode attention kernels against a candidate rewrite, on the int8 cache a decode
step reads: µs per layer, TB/s over the bytes the slots' prefixes hold, and the error against
float32 attention over the dequantized cache.

    python -m pipeline.bench attention --rows 1024 --attend 256 512
    python -m pipeline.bench attention --check     # small shapes, errors only (TRITON_INTERPRET=1 on a CPU)

Kernels:
  engine    pipeline/engine/decode_attention.py, one program per (slot, head), imported
  split     the engine's split-K kernel (``kernel="split"``); "block" is its partition
  dot       the candidate (attention_kernels.py): scores and the value sum on tensor cores (fp16)
  dot8      as dot, the scores an int8 x int8 product
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from pipeline.bench.attention_kernels import dot_attention
from pipeline.bench.gpu_timing import seconds_per_run
from pipeline.engine import decode_attention as engine_kernels
from pipeline.engine import kv_int8

VARIANTS = ("engine", "split", "dot", "dot8")
Tensors = list[torch.Tensor]


def run_variant(name: str, tensors: Tensors, block: int, warps: int) -> torch.Tensor:
    if name == "engine":
        saved = engine_kernels.BLOCK_POSITIONS, engine_kernels.WARPS
        engine_kernels.BLOCK_POSITIONS, engine_kernels.WARPS = block, warps  # the sweep's knobs
        try:
            return engine_kernels.decode_attention(*tensors, kernel="single")
        finally:
            engine_kernels.BLOCK_POSITIONS, engine_kernels.WARPS = saved
    if name == "split":
        return engine_kernels.decode_attention(*tensors, kernel="split", partition=block)
    return dot_attention(*tensors, int8_scores=name == "dot8", block=block, warps=warps)


def reference(query, keys, values, used, key_scales, value_scales) -> torch.Tensor:
    k = keys.float() * key_scales[..., None]
    v = values.float() * value_scales[..., None]
    scores = torch.einsum("bhd,bhpd->bhp", query.float(), k) / math.sqrt(query.shape[-1])
    positions = torch.arange(keys.shape[2], device=keys.device)
    scores = scores.masked_fill(positions[None, None, :] >= used[:, None, None].long(), float("-inf"))
    return torch.einsum("bhp,bhpd->bhd", scores.softmax(-1), v)


def inputs(rows: int, attend: int, device: torch.device, heads: int = 12, dim: int = 64,
           seed: int = 0) -> Tensors:
    """query, keys, values, used, key scales, value scales of ``rows`` slots of mixed lengths."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    used = torch.randint(attend // 4, attend + 1, (rows,), generator=generator, dtype=torch.int32)
    shape = (rows, heads, attend, dim)
    # keys with a few strong directions, as trained caches have: scores spread over several units
    query = (torch.randn(rows, heads, dim, generator=generator) * 2).half()
    keys = torch.randint(-127, 128, shape, generator=generator, dtype=torch.int8)
    values = torch.randint(-127, 128, shape, generator=generator, dtype=torch.int8)
    key_scales = (torch.rand(shape[:3], generator=generator) / 100).to(kv_int8.SCALE_DTYPE)
    value_scales = (torch.rand(shape[:3], generator=generator) / 40).to(kv_int8.SCALE_DTYPE)
    return [t.to(device) for t in (query, keys, values, used, key_scales, value_scales)]


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want).norm() / want.norm()).item()


def check(device: torch.device) -> float:
    """Every kernel on a small shape; returns the worst relative error."""
    tensors = inputs(4, 40, device)
    want = reference(*tensors)
    worst = 0.0
    for name in VARIANTS:
        for block in (16, 32):
            error = relative_error(run_variant(name, tensors, block, warps=1), want)
            worst = max(worst, error)
            print(f"{name} block {block}: relative error {error:.2e}", flush=True)
    return worst


def sweep(rows: int, attend: int) -> None:
    tensors = inputs(rows, attend, torch.device("cuda"))
    want = reference(*tensors)
    query, used = tensors[0], tensors[3]
    heads, dim = query.shape[1], query.shape[2]
    byte_count = int(used.sum()) * heads * (2 * dim + 8)
    print(f"\n{rows} slots, lengths {attend // 4}..{attend}, one layer, int8 cache")
    print("| kernel | block | warps | µs | TB/s | relative error |")
    print("|---|---|---|---|---|---|")
    for name in VARIANTS:
        best = None
        for block in (16, 32, 64):
            for warps in (1, 2, 4):
                timed = timed_variant(name, tensors, block, warps, want, byte_count)
                if timed is not None:
                    best = min(best or (timed, block, warps), (timed, block, warps))
        if best:
            print(f"BEST {name}: block {best[1]}, {best[2]} warps, {best[0] * 1e6:.1f} µs", flush=True)


def timed_variant(name: str, tensors: Tensors, block: int, warps: int, want: torch.Tensor,
                  byte_count: int) -> float | None:
    """One row of the sweep's table; seconds per run, or None for a shape the kernel cannot take."""
    run: Callable[[], torch.Tensor] = lambda: run_variant(name, tensors, block, warps)
    try:
        error = relative_error(run(), want)
        seconds = seconds_per_run(run)
    except Exception as failure:  # noqa: BLE001 (a shape this kernel cannot compile is a row that says so)
        print(f"| {name} | {block} | {warps} | failed: {failure.__class__.__qualname__} | | |")
        return None
    print(f"| {name} | {block} | {warps} | {seconds * 1e6:.1f} | "
          f"{byte_count / seconds / 1e12:.2f} | {error:.2e} |", flush=True)
    return seconds


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench attention") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1024], help="slots (default 1024)")
    parser.add_argument("--attend", type=int, nargs="+", default=[256], help="longest slot (default 256)")
    parser.add_argument("--check", action="store_true", help="small shapes, errors only")
    args = parser.parse_args(argv)
    if args.check:
        worst = check(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        return 0 if worst < 1e-2 else 1
    for rows in args.rows:
        for attend in args.attend:
            sweep(rows, attend)
    return 0


def attention_table(smoke: bool) -> list[dict[str, Any]]:
    """gpu_checks' attention section: the current kernel against the word kernel and split-K
    partitions on the int8 cache of a decode step, µs and TB/s, by shape."""
    from pipeline.engine import split_attention, word_attention

    device = torch.device("cpu" if smoke else "cuda")
    # (rows, context, cache positions): the bench's slots, and a worker's (2,304 positions held)
    shapes = ([(4, 40, 64)] if smoke else [(r, c, c) for r in (256, 512, 1024) for c in (128, 256, 512)]
              + [(1024, 256, 2304)])
    # (kernel, partition, block, warps)
    words = [(32, 1), (64, 1)]
    splits = [(p, b, w) for p in (64, 128, 256) for b, w in ((32, 1), (64, 2))]
    if smoke:  # the flow of each kind once (the interpreter is slow)
        words, splits = [(32, 1)], [(16, 32, 1)]
    variants = ([("single", None, 32, 1)] + [("words", None, b, w) for b, w in words]
                + [("split", p, b, w) for p, b, w in splits])
    rows: list[dict[str, Any]] = []
    for slots, context, capacity in shapes:
        tensors = inputs(slots, context, device)
        tensors[3] = torch.randint(context * 7 // 8, context + 1, (slots,), dtype=torch.int32).to(device)
        grow = capacity - context  # positions the cache holds beyond the rows' lengths
        tensors[1:3] = [torch.nn.functional.pad(t, (0, 0, 0, grow)) for t in tensors[1:3]]
        tensors[4:6] = [torch.nn.functional.pad(t, (0, grow)) for t in tensors[4:6]]
        want = reference(*tensors)
        heads, dim = tensors[0].shape[1], tensors[0].shape[2]
        read = int(tensors[3].sum()) * heads * (2 * dim + 8)  # int8 keys and values, two scales
        single = None
        for kernel, partition, block, warps in variants:
            split_attention.BLOCK, split_attention.WARPS = block, warps
            word_attention.BLOCK_POSITIONS, word_attention.WARPS = block, warps
            run = functools.partial(engine_kernels.decode_attention, *tensors, kernel=kernel,
                                    partition=partition)
            error = relative_error(run(), want)
            seconds = seconds_per_run(run, repeats=1 if smoke else 50, warm_ups=0 if smoke else 5)
            single = seconds if kernel == "single" else single
            rows.append({"rows": slots, "context": context, "cache": capacity, "kernel": kernel, "partition": partition,
                         "block": block, "warps": warps, "us": seconds * 1e6,
                         "tb_s": read / seconds / 1e12, "vs_single": single / seconds,
                         "rel_error": error})
    split_attention.BLOCK, split_attention.WARPS = 32, 1  # the defaults back
    word_attention.BLOCK_POSITIONS, word_attention.WARPS = 32, 1
    return rows

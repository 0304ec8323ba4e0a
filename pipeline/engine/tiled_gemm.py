"""A decode step's two linears whose output is the hidden width (o: 768 x 768, down: 768 x 3,072)
as one Triton kernel of small tiles.

Why: at a step's rows cuBLAS runs them as few large tiles — 48 of 128 x 128 for a 1,024-row
output of 768 columns on 132 SMs — at 265 (o) and 433 (down) TFLOPS on an H100, where gate_up
reached 594 (docs/engine.md); tiles of 64 rows spread them over ~100 SMs. Off until measured
(``EngineTuning.decode_gemm_tiles``, TTS_JOBS_DECODE_GEMM_TILES=1): ``python -m pipeline.bench
gemm-shapes`` times each tile against the library, the engine bench the step. Products of more
than ``MOST_ROWS`` rows (an admission's prefill of many positions) keep the library's big tiles,
which fill the SMs there; a small prefill takes the kernel as a step does, eager or graphed alike.
"""

from __future__ import annotations

import torch
from torch import nn

from pipeline.engine.triton_import import tl, triton

ON = False  # EngineTuning.decode_gemm_tiles (loading.apply_tuning)
TILE = (64, 64, 64, 4, 3)  # rows x columns x depth of a tile, warps, pipeline stages
MOST_ROWS = 2048  # rows of the widest decode step (its slots); more: a big prefill's positions


def available() -> bool:
    return triton is not None


if triton is not None:  # pragma: no cover - a CUDA build (and TRITON_INTERPRET=1)
    @triton.jit
    def _tiled_mm(x_ptr, w_ptr, out_ptr, rows, columns: tl.constexpr, depth: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """out[rows, columns] = x[rows, depth] @ w[columns, depth]^T, summed in fp32, stored in fp16."""
        at_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        at_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        at_k = tl.arange(0, BLOCK_K)
        inside = at_m[:, None] < rows
        total = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(0, depth, BLOCK_K):
            a = tl.load(x_ptr + at_m[:, None] * depth + (k + at_k)[None, :], mask=inside, other=0.0)
            b = tl.load(w_ptr + at_n[None, :] * depth + (k + at_k)[:, None])  # a [BLOCK_K, BLOCK_N] tile of w^T
            total = tl.dot(a, b, total)
        tl.store(out_ptr + at_m[:, None] * columns + at_n[None, :], total.to(tl.float16), mask=inside)


def fits(weight: torch.Tensor, tile: tuple[int, ...]) -> bool:
    """Whether ``tile``'s columns and depth divide ``weight`` [columns, depth] (the kernel masks rows only)."""
    return weight.shape[0] % tile[1] == 0 and weight.shape[1] % tile[2] == 0


def tiled_mm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, tile: tuple[int, ...] = TILE) -> None:
    """``x @ w.T`` into ``out``: x [rows, depth], w [columns, depth] and out contiguous, half precision."""
    block_m, block_n, block_k, warps, stages = tile
    rows, depth = x.shape
    columns = w.shape[0]
    grid = (triton.cdiv(rows, block_m), columns // block_n)
    _tiled_mm[grid](x, w, out, rows, columns, depth, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                    num_warps=warps, num_stages=stages)


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` for x [..., depth]: by the tiled kernel where it is on and the product is one
    of a decode step's size (CUDA, fp16, at most ``MOST_ROWS`` rows, no bias), else by the layer."""
    flat = x.reshape(-1, x.shape[-1])
    if not (ON and available() and flat.is_cuda and flat.dtype == torch.float16 and layer.bias is None
            and flat.shape[0] <= MOST_ROWS and fits(layer.weight, TILE)):
        return layer(x)
    out = flat.new_empty(flat.shape[0], layer.weight.shape[0])
    tiled_mm(flat.contiguous(), layer.weight, out)
    return out.view(*x.shape[:-1], layer.weight.shape[0])

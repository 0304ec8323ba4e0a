"""The MLP's second half as one Triton GEMM, against the engine's two kernels: does it win?

The engine runs SiLU x up (``layer_kernels.silu_mul``: the gate and up halves normalised by the
residual row's RMS, 12.6 MB read and 6.3 MB written at 1,024 rows; 5.4 us a layer on an H100) and
then cuBLAS's down GEMM adding the residual in its epilogue (``llama_layer.plus_product``). Here
one kernel makes each tile of SiLU x up as it feeds the tensor cores (the normalisation, SiLU and
product in its A operand's path) and adds the residual as it stores: no [rows, 3,072] tensor
written or read. A Triton GEMM alone lost to cuBLAS at these 768-wide outputs (down 14.7 against
11.6 us on an H100, docs/engine.md); with SiLU x up inside it needs only to beat the two kernels'
sum. Tile shapes are swept; the table says which, if any, is faster, and the largest difference
from the engine's output.

    python -m pipeline.bench gated-down                 # 256, 512, 1,024 rows on the GPU
    TRITON_INTERPRET=1 python -m pipeline.bench gated-down --cpu-smoke   # tiny shapes: the flow
"""

from __future__ import annotations

import argparse

import torch

from pipeline.bench.gpu_timing import graphed_seconds_per_run
from pipeline.bench.linears import HIDDEN, INTERMEDIATE
from pipeline.engine import layer_kernels
from pipeline.engine.triton_import import tl, triton

EPS = 1e-5
# (BM, BN, BK, warps, stages): rows and outputs a program, the inner dimension a step
TILES = ((64, 128, 64, 4, 3), (64, 128, 64, 4, 4), (128, 128, 64, 8, 3), (64, 64, 64, 4, 4),
         (128, 64, 64, 4, 3), (64, 256, 64, 8, 3), (128, 256, 64, 8, 3))

if triton is not None:  # pragma: no cover - Triton code

    @triton.jit
    def _gated_down_kernel(gate_up_ptr, x_ptr, w_ptr, out_ptr, rows, eps, stride_g, stride_x, stride_w,
                           stride_o, INNER: tl.constexpr, WIDTH: tl.constexpr, BM: tl.constexpr,
                           BN: tl.constexpr, BK: tl.constexpr):
        lines = tl.program_id(0) * BM + tl.arange(0, BM)
        inside = (lines < rows)[:, None]
        square = tl.zeros([BM], tl.float32)
        for start in range(0, WIDTH, BN):  # each row's RMS over the residual, BN columns at a time
            cols = start + tl.arange(0, BN)
            x = tl.load(x_ptr + lines[:, None] * stride_x + cols[None, :], mask=inside, other=0.0).to(tl.float32)
            square += tl.sum(x * x, 1)
        norm = tl.rsqrt(square / WIDTH + eps)[:, None]
        outs = tl.program_id(1) * BN + tl.arange(0, BN)
        acc = tl.zeros([BM, BN], tl.float32)
        for start in range(0, INNER, BK):
            ks = start + tl.arange(0, BK)
            at = gate_up_ptr + lines[:, None] * stride_g + ks[None, :]
            gate = tl.load(at, mask=inside, other=0.0).to(tl.float32) * norm
            up = tl.load(at + INNER, mask=inside, other=0.0).to(tl.float32) * norm
            silu = (gate / (1.0 + tl.exp(-gate))).to(tl.float16).to(tl.float32)  # as silu_mul rounds it
            weights = tl.load(w_ptr + outs[None, :] * stride_w + ks[:, None])  # W^T's [BK, BN] tile
            acc = tl.dot((silu * up).to(tl.float16), weights, acc)
        cell = lines[:, None] * stride_x + outs[None, :]
        total = acc + tl.load(x_ptr + cell, mask=inside, other=0.0).to(tl.float32)
        tl.store(out_ptr + lines[:, None] * stride_o + outs[None, :], total.to(tl.float16), mask=inside)


def gated_down(gate_up: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, tile: tuple[int, ...]) -> torch.Tensor:
    """x + down(silu(g) * u), (g, u) = gate_up * 1 / RMS(x) by rows: gate_up [R, 2I], x [R, C],
    the down weight [C, I]; one kernel."""
    rows, width = x.shape
    inner = weight.shape[1]
    block_m, block_n, block_k, warps, stages = tile
    out = torch.empty_like(x)
    _gated_down_kernel[(triton.cdiv(rows, block_m), triton.cdiv(width, block_n))](
        gate_up, x, weight, out, rows, EPS, gate_up.stride(0), x.stride(0), weight.stride(0), out.stride(0),
        INNER=inner, WIDTH=width, BM=block_m, BN=block_n, BK=block_k, num_warps=warps, num_stages=stages)
    return out


def engine_way(gate_up: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """What the engine runs: SiLU x up normalising its input, then the down GEMM adding x."""
    return torch.addmm(x, layer_kernels.silu_mul(gate_up, x, EPS), weight.t())


def measure(rows: int, width: int, inner: int, device: torch.device, tiles: tuple[tuple[int, ...], ...],
            repeats: int) -> list[tuple[str, float, float]]:
    """(way, seconds, largest difference from the engine's output relative to its largest value)."""
    generator = torch.Generator(device=device).manual_seed(rows)
    x = torch.randn(rows, width, device=device, generator=generator).half() * 4
    gate_up = torch.randn(rows, 2 * inner, device=device, generator=generator).half() * 8
    weight = (torch.randn(width, inner, device=device, generator=generator) / inner**0.5).half()
    want = engine_way(gate_up, x, weight).float()
    scratch = x.clone()

    def engine_in_place() -> None:  # as the engine adds: into its own residual (no copy of x first)
        scratch.addmm_(layer_kernels.silu_mul(gate_up, x, EPS), weight.t())

    found = [("engine: SiLU x up, then cuBLAS adding x", graphed_seconds_per_run(engine_in_place, repeats), 0.0)]
    for tile in tiles:
        got = gated_down(gate_up, x, weight, tile).float()
        error = ((got - want).abs().max() / want.abs().max()).item()
        seconds = graphed_seconds_per_run(lambda t=tile: gated_down(gate_up, x, weight, t), repeats)
        found.append(("one kernel, tile {}x{}x{}, {} warps, {} stages".format(*tile), seconds, error))
    return found


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench gated-down") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="rows (repeatable; default 256, 512, 1024)")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny shapes on the CPU under TRITON_INTERPRET=1: the flow and the sums only")
    args = parser.parse_args(argv)
    if triton is None:
        print("gated-down: Triton is not installed here (it ships with CUDA builds of PyTorch)")
        return 2
    if args.cpu_smoke:
        shapes, device, tiles, repeats = [(10, 64, 128)], torch.device("cpu"), ((16, 32, 32, 1, 1),), 1
    elif not torch.cuda.is_available():
        print("gated-down: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow")
        return 2
    else:
        shapes = [(rows, HIDDEN, INTERMEDIATE) for rows in args.rows or [256, 512, 1024]]
        device, tiles, repeats = torch.device("cuda"), TILES, 50
    print(f"the MLP's SiLU x up + down GEMM + residual add on {torch.cuda.get_device_name() if device.type == 'cuda' else 'the CPU'}")
    print("| rows | way | µs | against the engine | largest difference |\n|---|---|---|---|---|")
    with torch.inference_mode():
        for rows, width, inner in shapes:
            found = measure(rows, width, inner, device, tiles, repeats)
            engine = found[0][1]
            for way, seconds, error in found:
                print(f"| {rows} | {way} | {seconds * 1e6:.1f} | {engine / seconds:.2f}x | {error:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

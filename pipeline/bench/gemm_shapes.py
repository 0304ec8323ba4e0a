"""The decode step's GEMMs at the step's own shapes: cuBLAS and cuBLASLt (``torch.mm``) against a
plain Triton kernel of small tiles, per linear and row count.

Why: a step's four linears take ~0.79 ms of its 2.44 at 1,024 rows on an H100 (39.6 us a layer),
and the two whose output is the hidden width (o: 768 x 768, down: 768 x 3,072) ran at 265 and
433 TFLOPS where gate_up reached 594: at 128 x 128 tiles a 1,024-row output of 768 columns is 48
tiles for 132 SMs. Smaller tiles spread it over more SMs; whether a Triton kernel of them beats
the library is what this measures (the engine's kernel, ``pipeline/engine/tiled_gemm.py``, on
with TTS_JOBS_DECODE_GEMM_TILES=1 at its ``TILE``).

    python -m pipeline.bench gemm-shapes                  # rows 256, 512, 1,024 (a GPU)
    python -m pipeline.bench gemm-shapes --cpu-smoke      # the Triton kernel's answer checked, no timing

Each timing is a CUDA graph of 20 runs replayed (a single kernel of a few microseconds is
shorter than its own launch from Python), divided by 20.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from pipeline.bench.gpu_timing import seconds_per_run
from pipeline.engine.tiled_gemm import available, fits, tiled_mm

# ChatTTS's GPT linears (hidden 768, MLP 3,072): output features, input features
SHAPES = {"qkv": (2304, 768), "o": (768, 768), "gate_up": (6144, 768), "down": (768, 3072)}
# (rows, columns, depth) of a tile, warps, pipeline stages
TILES = ((64, 64, 64, 4, 3), (64, 128, 64, 4, 3), (128, 64, 64, 4, 3), (64, 64, 128, 4, 2),
         (128, 128, 64, 8, 3))
RUNS_PER_GRAPH = 20


def replayed_seconds(run: Callable[[], object]) -> float:
    """Seconds one ``run()`` takes on the GPU: RUNS_PER_GRAPH of them captured as one graph."""
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(RUNS_PER_GRAPH):
            run()
    return seconds_per_run(graph.replay) / RUNS_PER_GRAPH


def worst_error(device: torch.device, rows: int, tile: tuple[int, ...], name: str) -> float:
    """The Triton kernel's largest difference from an fp32 product, relative to its largest value."""
    columns, depth = SHAPES[name]
    x = torch.randn(rows, depth, device=device).half()
    w = (torch.randn(columns, depth, device=device) / depth**0.5).half()
    out = torch.empty(rows, columns, device=device, dtype=torch.half)
    tiled_mm(x, w, out, tile)
    exact = x.float() @ w.float().t()
    return float((out.float() - exact).abs().max() / exact.abs().max())


def time_shapes(rows_list: list[int]) -> None:
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name()}: us per GEMM (TFLOPS); tiles rows x columns x depth, warps, stages")
    for name, (columns, depth) in SHAPES.items():
        for rows in rows_list:
            x = torch.randn(rows, depth, device=device).half()
            w = (torch.randn(columns, depth, device=device) / depth**0.5).half()
            out = torch.empty(rows, columns, device=device, dtype=torch.half)
            flops = 2 * rows * columns * depth
            cells = []
            for library in ("cublas", "cublaslt"):
                torch.backends.cuda.preferred_blas_library(library)
                seconds = replayed_seconds(lambda: torch.mm(x, w.t(), out=out))
                cells.append(f"{library} {seconds * 1e6:.1f} ({flops / seconds / 1e12:.0f})")
            for tile in TILES:
                if not fits(w, tile):
                    continue
                label = f"{'x'.join(map(str, tile[:3]))} w{tile[3]} s{tile[4]}"
                try:  # a tile that does not compile (shared memory) is a cell, not the end of the table
                    seconds = replayed_seconds(lambda tile=tile: tiled_mm(x, w, out, tile))
                except Exception as error:  # noqa: BLE001
                    cells.append(f"{label} failed: {type(error).__name__}")
                    continue
                error = worst_error(device, rows, tile, name)
                flag = "" if error < 1e-2 else f" WRONG {error:.1e}"
                cells.append(f"{label} {seconds * 1e6:.1f} ({flops / seconds / 1e12:.0f}){flag}")
            print(f"| {name} | {rows} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench gemm-shapes") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="the Triton kernel's answer under its CPU interpreter (TRITON_INTERPRET=1), no timing")
    args = parser.parse_args(argv)
    if not available():
        parser.error("the Triton kernel needs Triton (a CUDA build of PyTorch)")
    if args.cpu_smoke:
        worst = max(worst_error(torch.device("cpu"), rows, (32, 64, 64, 4, 1), name)
                    for rows in (5, 70) for name in ("o", "down"))
        print(f"largest error against fp32, relative: {worst:.2e}")
        return 0 if worst < 1e-2 else 1
    if not torch.cuda.is_available():
        parser.error("timing needs a CUDA GPU (--cpu-smoke checks the kernel on a CPU)")
    time_shapes(args.rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

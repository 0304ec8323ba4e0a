"""Where an admission's prefill goes: newcomers' prompts run through the GPT and admitted into
the decode slots, the engine's own path (``LoopRunner.prefill``: the padded shape's graph where
graphs are on, then the int8 cache's admission), timed per admission and profiled.

In a 25.7-hour run on an H100 the prefills took 5.1-7.3 s of device time beside 22-27 s of decode
steps (docs/benchmarks.md): ~150-190 admissions of up to 128 rows, ~30-40 ms each, where the
GEMMs' own work (2 x the GPT's weights x the padded positions) is ~8-10 ms at ~600 TFLOPS. This
says which part holds the rest.

    python -m pipeline.bench prefill-profile --rows 128 --width 100 [--rows 37 --width 60 ...]
    python -m pipeline.bench prefill-profile --cpu-smoke     # tiny weights on the CPU: the flow only

Full-size SYNTHETIC weights (noise, never speech).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from pipeline.bench.gpu_timing import seconds_per_run
from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.loop_runner import LoopRunner
from pipeline.engine.prefill import padded_shape
from pipeline.engine.prompts import PromptBatch
from pipeline.engine.sampling import RowSampling
from pipeline.engine.slots import SlotShape
from pipeline.engine.timing import PhaseClock
from pipeline.engine.weights import write_synthetic_weights


def admission(engine, rows: int, width: int) -> tuple[LoopRunner, PromptBatch, RowSampling]:
    """Slots for ``rows`` newcomers of ``width`` prompt positions each (random embeddings, every
    position real), and their sampling."""
    gpt, emb = engine.parts.gpt, engine.parts.embeddings
    device = gpt.norm.device
    shape = SlotShape(rows, width + 64, 64, emb.codebooks, emb.vocab, True)
    runner = LoopRunner(gpt, engine.step_runner.space, engine.step_runner, PhaseClock(device), shape)
    prompts = PromptBatch(embeds=torch.randn(rows, width, gpt.hidden, device=device).to(gpt.dtype),
                          valid=torch.ones(rows, width, dtype=torch.bool, device=device),
                          positions=torch.arange(width, device=device).expand(rows, width).contiguous(),
                          lengths=torch.full((rows,), width, dtype=torch.int64, device=device))
    sampling = RowSampling.build([0.3] * rows, [0.7] * rows, [20] * rows, [1.05] * rows, list(range(rows)), device)
    return runner, prompts, sampling


def admit_once(runner: LoopRunner, prompts: PromptBatch, sampling: RowSampling) -> None:
    rows, width = prompts.rows, prompts.width
    runner.prefill(prompts, list(range(rows)), list(range(rows)), [width] * rows, [0] * rows, [64] * rows,
                   sampling)


def time_admissions(engine, rows: int, width: int, graphs: bool, repeats: int) -> float:
    """Milliseconds per admission of ``rows`` x ``width`` (graphs on or off), launch gaps included."""
    engine.step_runner.prefills.enabled = graphs
    runner, prompts, sampling = admission(engine, rows, width)
    return seconds_per_run(lambda: admit_once(runner, prompts, sampling), repeats, warm_ups=2) * 1e3


def report(engine, rows: int, width: int, on_gpu: bool, repeats: int) -> None:
    """Each way's time per admission and the GEMMs' TFLOPS at the shape it runs at (padded on a
    GPU, ``prefill.pads_admissions``), then the profiler's kernel table of one eager admission
    (op by op: what a graph replays as one launch)."""
    padded = (padded_shape(rows, width) if on_gpu else None) or (rows, width)
    flops = 2.0 * sum(p.numel() for p in engine.parts.gpt.layers.parameters()) * padded[0] * padded[1]
    for graphs in ((True, False) if on_gpu else (False,)):
        ms = time_admissions(engine, rows, width, graphs, repeats)
        print(f"admission of {rows} rows x {width} positions (run at {padded[0]} x {padded[1]}), "
              f"{'graph' if graphs else 'eager'}: {ms:.2f} ms; GEMM work {flops / 1e12:.3f} TFLOP "
              f"-> {flops / (ms / 1e3) / 1e12:.1f} TFLOPS")
    runner, prompts, sampling = admission(engine, rows, width)
    activity = ProfilerActivity.CUDA if on_gpu else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        admit_once(runner, prompts, sampling)
        if on_gpu:
            torch.cuda.synchronize()
    sort = "cuda_time_total" if on_gpu else "cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=70))


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench prefill-profile") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="newcomers of one admission (repeatable)")
    parser.add_argument("--width", type=int, action="append", help="their prompt positions (one per --rows)")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny weights on the CPU: the flow, no measure")
    args = parser.parse_args(argv)
    shapes = list(zip(args.rows or [128], args.width or [100], strict=False))
    on_gpu = not args.cpu_smoke
    if args.cpu_smoke:
        shapes, args.precision, args.repeats = [(4, 24)], "fp32", 2
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        write_synthetic_weights(Path(tmp), "tiny" if args.cpu_smoke else "full", 0)
        engine = load_engine(EngineConfig(model_dir=Path(tmp), device="cuda" if on_gpu else "cpu",
                                          precision=args.precision))
        for rows, width in shapes:
            report(engine, rows, width, on_gpu, args.repeats)
    return 0

"""Throughput benchmark of the engine against upstream ChatTTS, following shared/PERFORMANCE.md.

Every row reads the same workload (``protocol.py``) with the same voice, timed from text in to float
waveforms out; model load and one warm-up batch are reported apart. tts-jobs rows
(``engine_runner.py``): one per precision, then extra batch sizes in the first reduced precision.
Upstream rows (``upstream_runner.py``): fp32 at batch 4 and larger sizes, in the same run, so that
the ratios compare like with like (``report.py``).

Run: ``python -m pipeline.bench --synthetic full --device cuda --json out.json`` (the default command
of ``commands.py``; also ``tts-jobs bench ...``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import platform
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.bench.commands import PROGRAM, listing
from pipeline.bench.engine_runner import Say, fp32_reference, run_engine_rows
from pipeline.bench.gpu_timing import copy_ceiling_tbs
from pipeline.bench.harness import bench_weights, memory_history
from pipeline.bench.protocol import BenchOptions, forced_steps, make_workload
from pipeline.bench.report import COPY_CEILING_TBS, BenchReport, BenchRow, describe, format_table, ratios
from pipeline.bench.upstream_runner import run_upstream_row
from pipeline.types import GPT_STEPS_PER_SECOND

log = logging.getLogger(__name__)



def run_bench(opts: BenchOptions, progress: Say | None = None) -> BenchReport:
    """Run the protocol and return every row (see the module docstring)."""
    import torch

    from pipeline.engine.loading import resolve_device

    say = progress or (lambda message: log.info("%s", message))
    device = resolve_device(opts.device)
    on_gpu = device.type == "cuda"
    # before any cap: the ceiling of the card itself (an H100 lent for an H200 reads ~3, not 4.3)
    ceiling = copy_ceiling_tbs(device) if on_gpu else COPY_CEILING_TBS
    if on_gpu:
        say(f"copy ceiling: {ceiling:.2f} TB/s (a 1-GiB device-to-device copy, read and write)")
    if on_gpu and opts.memory_gib:  # both systems, the whole run: as a card of that size
        from pipeline.engine.memory import cap_device_memory

        cap_device_memory(device, opts.memory_gib)
        say(f"GPU memory capped at {opts.memory_gib:g} GiB for every row")
    texts = make_workload(opts.sentences or (1024 if on_gpu else 48), opts.seed)
    steps = [min(forced_steps(t), opts.max_steps or 10**9) for t in texts]
    with bench_weights(opts) as (model_dir, weights_label):
        say(f"workload: {len(texts)} sentences, {sum(steps)} GPT steps "
            f"({sum(steps) / GPT_STEPS_PER_SECOND:.0f} s of audio); weights {weights_label}")
        rows = _BenchRun(model_dir, device, texts, steps, opts, say).rows()
    name = torch.cuda.get_device_name(device) if on_gpu else platform.processor() or "cpu"
    return BenchReport(rows=tuple(rows), device=f"{device.type}: {name}", weights=weights_label,
                       date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       command=" ".join(sys.argv), ratios=ratios(rows), ceiling_tbs=ceiling)


class _BenchRun:
    """The rows of one run, in the order that answers the main question first."""

    def __init__(self, model_dir: Path, device: Any, texts: list[str], steps: list[int],
                 opts: BenchOptions, say: Say) -> None:
        self.model_dir, self.device, self.texts, self.steps = model_dir, device, texts, steps
        self.opts, self.say = opts, say
        self.on_gpu = device.type == "cuda"
        self.reference, self.voice = fp32_reference(model_dir, device, texts, steps, opts, say)
        self.found: list[BenchRow] = []

    def rows(self) -> list[BenchRow]:
        """fp32 and the first reduced precision, then upstream, then the other precisions and the
        scaling rows: a run cut short still answers whether tts-jobs beats upstream."""
        precisions = self.opts.precisions or (("fp32", "fp16", "bf16", "int8") if self.on_gpu
                                              else ("fp32", "int8"))
        for precision in precisions[:2]:
            self._ours(precision, self.opts)
        if self.opts.upstream:
            for batch in self.opts.upstream_batches or ((4, 64, 256, 512) if self.on_gpu else (4, 16)):
                self._add(run_upstream_row(self.model_dir, self.device, self.texts, self.steps,
                                           batch, self.voice, self.opts.upstream_seconds))
        for precision in precisions[2:]:
            self._ours(precision, self.opts)
        self._scaling_rows([p for p in precisions if p != "fp32"][:1])
        return self.found

    def _scaling_rows(self, reduced: list[str]) -> None:
        scaling = self.opts.scaling_batches if self.opts.scaling_batches is not None else (
            (512,) if self.on_gpu else ())
        for entry in scaling if reduced else ():
            batch, slots = entry if isinstance(entry, tuple) else (entry, None)
            self._ours(reduced[0], replace(self.opts, batch=batch, slots=slots))

    def _ours(self, precision: str, opts: BenchOptions) -> None:
        for row in run_engine_rows(self.model_dir, self.device, precision, self.texts, self.steps,
                                   opts, self.reference):
            self._add(row)

    def _add(self, row: BenchRow) -> None:
        self.found.append(row)
        self.say(describe(row))


def main(argv: Sequence[str] | None = None, prog: str = PROGRAM) -> int:
    """Run, print the table, write the JSON."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("ChatTTS", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    args = _parser(prog).parse_args(argv)
    with memory_history(args.memory_history):  # from before the engine loads: every holder is seen
        report_bench(*options_from(args))
    return 0


def report_bench(opts: BenchOptions, json_path: Path | None) -> None:
    """Run the benchmark, write its JSON to ``json_path`` (if any) and print its table."""
    report = run_bench(opts, progress=lambda m: log.info("%s", m))
    if json_path:
        json_path.write_text(report.to_json())
    print(format_table(report))


def options_from(args: argparse.Namespace) -> tuple[BenchOptions, Path | None]:
    """BenchOptions and the JSON path from the parsed command line."""
    precisions = tuple(p for item in args.precision or [] for p in item.split(",") if p)
    scaling = args.scaling_batch or []
    opts = BenchOptions(model_dir=args.model_dir, synthetic=args.synthetic, device=args.device,
                        precisions=precisions, sentences=args.sentences, seed=args.seed,
                        batch=args.batch, slots=args.slots,
                        upstream_batches=tuple(args.upstream_batch) if args.upstream_batch else None,
                        upstream=not args.no_upstream, upstream_seconds=args.upstream_seconds,
                        memory_gib=args.memory_gib, repeat=args.repeat,
                        profile_dir=args.profile, trace_dir=args.trace,
                        scaling_batches=tuple(b for b in scaling if b != 0) if scaling else None)
    return opts, args.json


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=HelpFormat,
        description="Synthesis throughput: tts-jobs against upstream ChatTTS, both in this run "
                    "(docs/benchmarks.md). Synthetic weights make noise: for speed, not sound.",
        epilog=f"Example: {prog} --synthetic full --device cuda --json bench.json\n\n{listing(prog)}")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path, metavar="DIR",
                        help="real ChatTTS weights (upstream layout)")
    source.add_argument("--synthetic", choices=("tiny", "full"),
                        help="random weights of that size instead (noise: for speed, not sound)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (default: auto)")
    parser.add_argument("--precision", action="append", metavar="PRECISION",
                        help="fp32, fp16, bf16, int8 (CUDA: weight-only), int8-dyn (CUDA: W8A8); "
                             "a suffix -kvint8 / -kvmodel sets the KV cache (default: int8 on "
                             "the GPU's fp16/bf16 path); repeat or comma-separate (default: "
                             "fp32,fp16,bf16,int8 on CUDA; fp32,int8 on CPU)")
    parser.add_argument("--sentences", type=int, metavar="N",
                        help="sentences in the workload (default: 1024 on CUDA, 48 on CPU)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed of the workload and the voice (default: 0)")
    parser.add_argument("--batch", type=int, default=256, metavar="N",
                        help="most sentences in one planned batch, the pool the slots draw from "
                             "(default: 256)")
    parser.add_argument("--slots", type=int, metavar="N",
                        help="sentences decoded at once (continuous batching); default: the batch")
    parser.add_argument("--memory-gib", type=float, metavar="GIB",
                        help="cap GPU memory for both systems at GIB, as a smaller card: tts-jobs "
                             "sizes its batches and slots from it; upstream rows that do not fit say so")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="time each tts-jobs row N times on the same loaded engine (default: 1)")
    parser.add_argument("--upstream-batch", action="append", type=int, metavar="N",
                        help="batch sizes of the upstream rows; repeat (default: 4,64,256,512 on "
                             "CUDA; 4,16 on CPU)")
    parser.add_argument("--scaling-batch", action="append", type=_batch_and_slots, metavar="N[:S]",
                        help="extra tts-jobs rows (first reduced precision) at batch N, or a pool "
                             "of N through S slots; 0 = none; repeat (default: 512 on CUDA, none "
                             "on CPU)")
    parser.add_argument("--upstream-seconds", type=float, default=75.0, metavar="SECONDS",
                        help="stop an upstream row after the batch that passes this (default: 75)")
    parser.add_argument("--no-upstream", action="store_true", help="leave out the upstream rows")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="cProfile each timed run into DIR (where the host time goes; slows the run)")
    parser.add_argument("--trace", type=Path, metavar="DIR",
                        help="torch.profiler trace of each timed run into DIR, for trace-gaps (slows the run)")
    parser.add_argument("--memory-history", type=Path, metavar="DIR",
                        help="the CUDA allocator's history into DIR/memory.pickle, for memory-peak (what "
                             "held the peak; slows the run)")
    return parser


class HelpFormat(argparse.RawDescriptionHelpFormatter):
    """argparse's help with "Usage:" as the rest of `tts-jobs` writes it."""

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


def _batch_and_slots(text: str) -> int | tuple[int, int]:
    batch, _, slots = text.partition(":")
    return (int(batch), int(slots)) if slots else int(batch)

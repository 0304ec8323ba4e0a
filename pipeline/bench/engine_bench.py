"""Throughput benchmark of the engine against upstream ChatTTS, following shared/PERFORMANCE.md.

Every row reads the same workload (``protocol.py``) with the same voice, timed from text in to float
waveforms out; model load and one warm-up batch are reported apart. tts-jobs rows
(``engine_runner.py``): one per precision, then extra batch sizes in the first reduced precision.
Upstream rows (``upstream_runner.py``): fp32 at batch 4 and larger sizes, in the same run, so that
the ratios compare like with like (``report.py``).

Run: ``tts-jobs bench --synthetic full --device cuda --json out.json`` (or ``python -m pipeline.bench``).
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

from pipeline.bench.engine_runner import Say, fp32_reference, run_engine_rows
from pipeline.bench.harness import bench_weights
from pipeline.bench.protocol import BenchOptions, forced_steps, make_workload
from pipeline.bench.report import BenchReport, BenchRow, describe, format_table, ratios
from pipeline.bench.upstream_runner import run_upstream_row
from pipeline.types import GPT_STEPS_PER_SECOND

log = logging.getLogger(__name__)

PROGRAM = "tts-jobs bench"


def run_bench(opts: BenchOptions, progress: Say | None = None) -> BenchReport:
    """Run the protocol and return every row (see the module docstring)."""
    import torch

    from pipeline.engine.loading import resolve_device

    say = progress or (lambda message: log.info("%s", message))
    device = resolve_device(opts.device)
    on_gpu = device.type == "cuda"
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
                       command=" ".join(sys.argv), ratios=ratios(rows))


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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m pipeline.bench``: run, print the table, write the JSON (`tts-jobs bench` takes
    the same options through its own command line and calls :func:`report_bench`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("ChatTTS", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    report_bench(*options_from(_parser().parse_args(argv)))


def report_bench(opts: BenchOptions, json_path: Path | None) -> None:
    """Run the benchmark, write its JSON to ``json_path`` (if any) and print its table."""
    report = run_bench(opts, progress=lambda m: log.info("%s", m))
    if json_path:
        json_path.write_text(report.to_json())
    print(format_table(report))


def options_from(args: Any) -> tuple[BenchOptions, Path | None]:
    """BenchOptions and the JSON path from parsed options named as the parser below names them
    (``--scaling-batch`` values as ``N``, ``N:S`` or already split)."""
    precisions = tuple(p for item in args.precision or [] for p in item.split(",") if p)
    scaling = [_batch_and_slots(b) if isinstance(b, str) else b for b in args.scaling_batch or []]
    opts = BenchOptions(model_dir=args.model_dir, synthetic=args.synthetic, device=args.device,
                        precisions=precisions, sentences=args.sentences, seed=args.seed,
                        batch=args.batch, slots=args.slots,
                        upstream_batches=tuple(args.upstream_batch) if args.upstream_batch else None,
                        upstream=not args.no_upstream, upstream_seconds=args.upstream_seconds,
                        memory_gib=args.memory_gib, repeat=args.repeat,
                        scaling_batches=tuple(b for b in scaling if b != 0) if scaling else None)
    return opts, args.json


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="tts-jobs vs upstream ChatTTS throughput, both in this run "
        "(also runs as `python -m pipeline.bench`)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path)
    source.add_argument("--synthetic", choices=("tiny", "full"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", action="append",
                        help="fp32, fp16, bf16, int8 (CUDA: weight-only), int8-dyn (CUDA: W8A8); "
                             "a suffix -kvint8 / -kvmodel sets the KV cache (default: int8 on "
                             "the GPU's fp16/bf16 path); repeat or comma-separate")
    parser.add_argument("--sentences", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256,
                        help="most sentences in one planned batch (the pool the slots draw from)")
    parser.add_argument("--slots", type=int,
                        help="sentences decoded at once (continuous batching); default: the batch")
    parser.add_argument("--memory-gib", type=float,
                        help="cap this process's GPU memory (both systems) at GIB, as a smaller card: "
                             "tts-jobs sizes its batches and slots from it; upstream rows that run "
                             "out of memory say so")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time each tts-jobs row this many times on the same loaded engine")
    parser.add_argument("--upstream-batch", action="append", type=int)
    parser.add_argument("--scaling-batch", action="append", type=_batch_and_slots,
                        help="extra tts-jobs rows (first reduced precision) at batch size N, or "
                             "N:S for a pool of N sentences through S slots; 0 = none")
    parser.add_argument("--upstream-seconds", type=float, default=75.0)
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--json", type=Path)
    return parser


def _batch_and_slots(text: str) -> int | tuple[int, int]:
    batch, _, slots = text.partition(":")
    return (int(batch), int(slots)) if slots else int(batch)

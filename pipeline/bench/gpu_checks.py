"""One H200 call, one table per question (sections below). Full-size SYNTHETIC weights (noise,
never speech). ~4-5 minutes on one H200.

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
    PYTHONWARNINGS=ignore::SyntaxWarning python -m pipeline.bench.gpu_checks --json $OUT/gpu_checks.json
    python -m pipeline.bench.gpu_checks --cpu-smoke   # tiny weights, CPU, Triton's interpreter (a test)

Sections (in this order, each also after one that failed; the exit status says if all ran):
  attention  µs per layer's attention, current kernel ("single") against the int8 cache read as
             words ("words") and split-K partitions, at
             256/512/1024 rows x 128/256/512 positions (and 256 in a worker's 2,304-position
             cache), int8; TB/s over the bytes read
  kernels    the engine bench (fp16, pool 2048 / 1024 slots, int8 KV) with each attention kernel
             named by --kernels (single and words)
  oom        96 rows x 300 steps, then a cap between resident memory and their peak: rows spoken,
             failures, learned rows, memory at the first error and retry, by pool when idle;
             with the engine's release, then with gc + empty_cache only (the old release)
  caps       the engine bench at caps of 4/8/24 GiB: x real time, peak, peak / cap, halvings
"""

from __future__ import annotations

import argparse
import json
import logging
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.settings import interpret_triton
from pipeline.bench.protocol import BenchOptions, forced_steps, make_workload
from pipeline.errors import OutOfDeviceMemory

SECTIONS = ("attention", "kernels", "oom", "caps")  # the order they run in: the caps come after
GIB = 2**30
Table = list[dict[str, Any]]


class OomProbe:
    """The engine as the out-of-memory policy sees it, with what memory held at each turn."""

    def __init__(self, engine: Any, release: bool, fail_above: int | None = None) -> None:
        self.engine, self.fail_above = engine, fail_above
        self.calls: list[tuple[int, bool]] = []  # (rows, ran)
        self.after_failure: dict[str, float] = {}
        if release:  # else the policy falls back to gc + empty_cache
            self.release_device_memory = engine.release_device_memory

    def synthesize(self, requests: Any, on_waveform: Any = None) -> Any:
        if self.calls and not self.calls[-1][1]:  # what the first retry finds
            self.after_failure = {**_memory("retry"), **self.after_failure}
        try:
            if self.fail_above is not None and len(requests) > self.fail_above:  # the smoke's cap
                raise OutOfDeviceMemory(f"{len(requests)} rows over the simulated cap")
            results = self.engine.synthesize(requests, on_waveform=on_waveform)
        except OutOfDeviceMemory:
            self.calls.append((len(requests), False))
            self.after_failure = {**_memory("failed"), **self.after_failure}  # the first one's
            raise
        self.calls.append((len(requests), True))
        return results


def oom_table(model_dir: Path, device: Any, smoke: bool, rows: int, steps: int) -> Table:
    """One capped batch through ``synthesize_fitting``, with and without the engine's release."""
    import numpy as np
    import torch

    from pipeline.engine import EngineConfig, load_engine
    from pipeline.engine.memory import cap_device_memory
    from pipeline.engine.oom import synthesize_fitting
    from pipeline.types import SynthesisRequest, SynthesisResult

    engine = load_engine(EngineConfig(model_dir=model_dir, device=str(device), precision="fp32" if smoke else "fp16"))
    engine.warm_up()  # calibration included, as a worker starts
    voice = engine.sample_voice(1)
    requests = [SynthesisRequest(text=f"第{i}句话，这是一个用来测试显存不足时自动减半的句子。", voice=voice, seed=i,
                                 max_new_tokens=steps, min_new_tokens=steps) for i in range(rows)]
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    reference = engine.synthesize(requests)
    peak = torch.cuda.max_memory_allocated() if on_gpu else 0
    engine.release_device_memory()
    resident = torch.cuda.memory_allocated() if on_gpu else 0
    before = {**_memory("idle"), **_pools()}
    if on_gpu:
        cap_device_memory(device, (resident + 0.4 * (peak - resident)) / GIB)
    table: Table = []
    for release in (True, False):
        probe = OomProbe(engine, release, fail_above=None if on_gpu else rows // 4)
        outcomes, fit = synthesize_fitting(probe, requests)
        spoken = [(o, r) for o, r in zip(outcomes, reference) if isinstance(o, SynthesisResult)]
        diff = max((float(np.max(np.abs(o.waveform - r.waveform))) if len(o.waveform) == len(r.waveform)
                    else float("inf") for o, r in spoken), default=float("inf"))
        table.append({"release": "engine" if release else "gc + empty_cache", "rows": rows, "steps": steps,
                      "spoken": len(spoken), "failures": fit.failures, "isolated": fit.isolated,
                      "learned_rows": fit.learned_rows, "max_wave_diff": diff, "peak_gib": peak / GIB,
                      "resident_gib": resident / GIB, "cap_gib": (resident + 0.4 * (peak - resident)) / GIB,
                      "calls": " ".join(f"{n}{'' if ran else '!'}" for n, ran in probe.calls),
                      **probe.after_failure, **before})
        engine.release_device_memory()
    return table


_REFERENCES: dict[tuple[int, int], Any] = {}  # fp32 fidelity data, per workload


def bench_table(model_dir: Path, device: Any, opts: BenchOptions, runs: list[tuple[str, str, float | None]],
                say: Callable[[str], None]) -> Table:
    """Engine bench rows (``engine_runner``): one per (label, attention kernel, memory cap).
    Where a run is capped, the largest cap holds from the fp32 reference on (an earlier section's
    cap must not starve it)."""
    from pipeline.bench.engine_runner import fp32_reference, run_engine_rows
    from pipeline.engine import decode_attention
    from pipeline.engine.memory import cap_device_memory

    caps = [cap for _, _, cap in runs if cap]
    if caps and device.type == "cuda":
        cap_device_memory(device, max(caps))
    texts = make_workload(opts.sentences or 1024, opts.seed)
    steps = [min(forced_steps(t), opts.max_steps or 10**9) for t in texts]
    key = (len(texts), opts.seed)
    if key not in _REFERENCES:  # one fp32 engine for the whole call
        _REFERENCES[key] = fp32_reference(model_dir, device, texts, steps, opts, say)[0]
    table: Table = []
    default = decode_attention.KERNEL
    for label, kernel, cap in runs:
        decode_attention.KERNEL = kernel  # read when the engine's steps are captured
        halvings = _Counter("pipeline.engine.oom")
        try:
            found = run_engine_rows(model_dir, device, "fp32" if device.type == "cpu" else "fp16",
                                    texts, steps, replace(opts, memory_gib=cap), _REFERENCES[key])
        finally:
            decode_attention.KERNEL = default
            halvings.logger.removeHandler(halvings)
        for row in found:
            say(f"{label}: {row.x_realtime:.1f}x real time, peak {row.peak_gib} GiB, {row.note}")
            table.append({"run": label, "kernel": kernel, "cap_gib": cap, "x_realtime": row.x_realtime,
                          "peak_gib": row.peak_gib, "peak_share": (row.peak_gib or 0) / cap if cap else None,
                          "batches": row.batches, "halvings": halvings.count, "warmup_s": row.warmup_s,
                          "warm_batch_s": row.warm_batch_s,
                          "step_ms": row.step_ms, "tb_s": row.bandwidth_tbs, "gpt_s": row.gpt_s,
                          "top1": row.top1_agreement, "snr_db": row.snr_db, "note": row.note})
    return table


class _Counter(logging.Handler):
    """Counts a logger's warnings while attached (the out-of-memory policy's halvings)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.WARNING)
        self.count, self.logger = 0, logging.getLogger(name)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _memory(prefix: str) -> dict[str, float]:
    import torch

    on_gpu = torch.cuda.is_available()
    return {f"{prefix}_reserved_gib": torch.cuda.memory_reserved() / GIB if on_gpu else 0.0,
            f"{prefix}_allocated_gib": torch.cuda.memory_allocated() / GIB if on_gpu else 0.0}


def _pools() -> dict[str, float]:
    """GiB reserved / allocated in the default and graph pools, pinned segments, their streams."""
    import torch

    found = dict.fromkeys(("default_reserved_gib", "default_allocated_gib", "graph_reserved_gib",
                           "graph_allocated_gib", "pinned_segments"), 0.0)
    streams = set()
    for segment in torch.cuda.memory_snapshot() if torch.cuda.is_available() else ():
        pool = "default" if tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0) else "graph"
        found[f"{pool}_reserved_gib"] += segment["total_size"] / GIB
        found[f"{pool}_allocated_gib"] += segment["allocated_size"] / GIB
        found["pinned_segments"] += 0 < segment["allocated_size"] < segment["total_size"]
        streams.add(segment.get("stream"))
    found["segment_streams"] = len(streams)
    return found


def print_table(title: str, table: Table) -> None:
    print(f"\n### {title}\n" + ("" if table else "(no rows)"))
    columns = list(dict.fromkeys(key for row in table for key in row))
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in table:
        print("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |", flush=True)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 and value else f"{value:.2f}"
    return "" if value is None else str(value)


def run_sections(args: argparse.Namespace) -> tuple[dict[str, Table], list[str]]:
    from pipeline.bench.attention import attention_table
    from pipeline.bench.harness import bench_weights
    from pipeline.engine.loading import resolve_device

    smoke = args.cpu_smoke
    device = resolve_device("cpu" if smoke else "cuda")
    opts = BenchOptions(synthetic="tiny" if smoke else "full", device=str(device), batch=8 if smoke else args.batch,
                        slots=4 if smoke else args.slots, sentences=8 if smoke else None, upstream=False,
                        repeat=1 if smoke else args.repeat, max_steps=6 if smoke else None,
                        fidelity_sentences=2 if smoke else 16)
    tables: dict[str, Table] = {}
    failed: list[str] = []  # sections that raised
    with bench_weights(opts) as (model_dir, _):
        jobs: dict[str, Callable[[], Table]] = {
            "attention": lambda: attention_table(smoke),  # pipeline/bench/attention.py
            "oom": lambda: oom_table(model_dir, device, smoke, 8 if smoke else 96, 6 if smoke else 300),
            "kernels": lambda: bench_table(model_dir, device, opts, [(f"no cap, {k}", k, None) for k in args.kernels], print),
            "caps": lambda: bench_table(model_dir, device, replace(opts, batch=8 if smoke else args.cap_batch, slots=None,
                                                                   sentences=opts.sentences if smoke else args.cap_sentences),
                                        [(f"cap {g:g} GiB", args.caps_kernel, g) for g in args.caps], print),
        }
        for name in [s for s in SECTIONS if s in args.sections]:  # caps last: a cap stays set
            try:
                tables[name] = jobs[name]()
            except Exception:  # noqa: BLE001 (one section's failure must not cost the call the others)
                failed.append(name)
                traceback.print_exc()
            print_table(name, tables.get(name, []))
            if args.json:  # after every section: a call cut short keeps what it measured
                args.json.write_text(json.dumps({"tables": tables, "failed": failed, "args": vars(args)},
                                                default=str))
    return tables, failed


def main(argv: list[str] | None = None) -> int:
    from pipeline.engine.decode_attention import KERNELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", type=_sections, default=list(SECTIONS), help=", ".join(SECTIONS))
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny weights on the CPU, Triton's interpreter")
    parser.add_argument("--batch", type=int, default=2048, help="kernels: the pool (default 2048)")
    parser.add_argument("--slots", type=int, default=1024, help="kernels: sentences decoded at once")
    parser.add_argument("--repeat", type=int, default=2, help="kernels: timed runs per kernel")
    parser.add_argument("--caps", type=float, nargs="+", default=[4.0, 8.0, 24.0])
    parser.add_argument("--cap-batch", type=int, default=1024, help="caps: most rows in a planned batch")
    parser.add_argument("--kernels", nargs="+", default=["single", "words"], choices=KERNELS,
                        help="kernels: the attention kernels benched (default single words)")
    parser.add_argument("--caps-kernel", default="words", choices=KERNELS)
    parser.add_argument("--cap-sentences", type=int, help="caps: sentences of the workload (default 1024)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        interpret_triton()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _, failed = run_sections(args)
    print(f"\nsections failed: {', '.join(failed)}" if failed else "\nall sections ran")
    return 1 if failed else 0


def _sections(text: str) -> list[str]:
    chosen = [name for name in text.split(",") if name]
    if not set(chosen) <= set(SECTIONS):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(SECTIONS)}")
    return chosen


if __name__ == "__main__":
    raise SystemExit(main())

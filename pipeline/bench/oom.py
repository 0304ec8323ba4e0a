"""A real CUDA out-of-memory, forced, and recovered by halving.

Synthesises a batch once with the whole GPU, then caps this process's GPU memory
(``torch.cuda.set_per_process_memory_fraction``) between what stays resident (weights) and that
batch's peak, and runs it again through ``oom.synthesize_fitting``: the batch must split, every
sentence must come back, with the same length and (batch-independent sampling) the same audio.
Prints the JSON report; ``tests/gpu/test_gpu_oom_recovery.py`` asserts it on a GPU machine.

    python -m pipeline.bench oom --rows 96 --steps 300
    python -m pipeline.bench oom --cpu-smoke     # tiny weights on the CPU: no cap, the flow only

Full-size SYNTHETIC weights (noise, never speech).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.engine import Engine, EngineConfig, load_engine
from pipeline.engine.oom import synthesize_fitting
from pipeline.engine.weights import write_synthetic_weights
from pipeline.types import SynthesisRequest, SynthesisResult


def requests_of(engine: Engine, rows: int, steps: int) -> list[SynthesisRequest]:
    voice = engine.sample_voice(1)
    return [SynthesisRequest(text=f"第{i}句话，这是一个用来测试显存不足时自动减半的句子。", voice=voice, seed=i,
                             max_new_tokens=steps, min_new_tokens=steps) for i in range(rows)]


def cap_between_resident_and_peak(engine: Engine, requests: list[SynthesisRequest],
                                  headroom: float) -> tuple[list[SynthesisResult], dict[str, Any]]:
    """The whole batch once (the reference), then a memory cap its halves fit under and it does
    not: resident memory + ``headroom`` of what the batch adds. No cap on a CPU."""
    on_gpu = torch.cuda.is_available() and engine.device.startswith("cuda")
    if on_gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    reference = engine.synthesize(requests)
    engine.release_slots()
    if not on_gpu:
        return reference, {"cap_gib": None}
    peak = torch.cuda.max_memory_allocated()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    resident = torch.cuda.memory_allocated()  # weights and buffers: what no batch size changes
    fraction = (resident + headroom * (peak - resident)) / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    return reference, {"gpu": torch.cuda.get_device_name(0), "reference_peak_gib": round(peak / 2**30, 2),
                       "resident_gib": round(resident / 2**30, 2), "cap_gib": round(fraction * total / 2**30, 2)}


def forced_recovery(engine: Engine, rows: int, steps: int, headroom: float = 0.4) -> dict[str, Any]:
    """The report: the cap, what the retries learned, and whether every sentence came back the same."""
    requests = requests_of(engine, rows, steps)
    reference, memory = cap_between_resident_and_peak(engine, requests, headroom)
    recovered, fit = synthesize_fitting(engine, requests)
    spoken = [r for r in recovered if isinstance(r, SynthesisResult)]
    diffs = [float(np.max(np.abs(a.waveform - b.waveform))) if len(a.waveform) == len(b.waveform)
             else float("inf") for a, b in zip(reference, recovered) if isinstance(b, SynthesisResult)]
    diffs = diffs or [float("inf")]
    return {**memory, "precision": engine.precision, "rows": rows, "steps": steps,
            "learned_rows": fit.learned_rows, "too_large_alone": fit.isolated, "sentences_back": len(spoken),
            "same_lengths": all(d != float("inf") for d in diffs), "max_abs_waveform_diff": max(diffs),
            "identical": max(diffs) == 0.0}


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench oom") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--headroom", type=float, default=0.4,
                        help="the cap: resident memory + this share of what the whole batch adds")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny weights on the CPU, 4 rows, no cap")
    args = parser.parse_args(argv)
    size, device = ("tiny", "cpu") if args.cpu_smoke else ("full", "cuda")
    if args.cpu_smoke:
        args.rows, args.steps, args.precision = 4, 12, "fp32"
    with tempfile.TemporaryDirectory() as tmp:
        model = write_synthetic_weights(Path(tmp), size).root
        engine = load_engine(EngineConfig(model_dir=model, device=device, precision=args.precision))
        engine.warm_up()
        print(json.dumps(forced_recovery(engine, args.rows, args.steps, args.headroom), indent=2))
    return 0

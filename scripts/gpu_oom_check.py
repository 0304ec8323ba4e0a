"""A real CUDA out-of-memory, forced, and recovered by halving (run on a GPU machine).

    python scripts/gpu_oom_check.py [--rows 96] [--steps 300]

Full-size SYNTHETIC weights (noise, never speech). Synthesises a batch once with the whole GPU, then
caps this process's GPU memory (torch.cuda.set_per_process_memory_fraction) between what stays
resident (weights) and that batch's peak and runs it again through `oom.synthesize_fitting`: the batch must split, every sentence
must come back, with the same length and (batch-independent sampling) the same audio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.oom import synthesize_fitting
from pipeline.engine.weights import write_synthetic_weights
from pipeline.types import SynthesisRequest, SynthesisResult


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--headroom", type=float, default=0.4,
                        help="the cap: resident memory + this share of what the whole batch adds")
    args = parser.parse_args()
    model = write_synthetic_weights(Path(tempfile.mkdtemp()), "full").root
    engine = load_engine(EngineConfig(model_dir=model, device="cuda", precision=args.precision))
    engine.warm_up()
    voice = engine.sample_voice(1)
    requests = [SynthesisRequest(text=f"第{i}句话，这是一个用来测试显存不足时自动减半的句子。", voice=voice, seed=i,
                                 max_new_tokens=args.steps, min_new_tokens=args.steps)
                for i in range(args.rows)]
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    reference = engine.synthesize(requests)
    peak = torch.cuda.max_memory_allocated()
    total = torch.cuda.get_device_properties(0).total_memory
    engine.release_slots()
    torch.cuda.empty_cache()
    resident = torch.cuda.memory_allocated()  # weights and buffers: what no batch size changes
    # a cap between what stays resident and the batch's peak: the whole batch cannot fit, its halves can
    fraction = (resident + args.headroom * (peak - resident)) / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    recovered, fit = synthesize_fitting(engine, requests)
    spoken = [r for r in recovered if isinstance(r, SynthesisResult)]
    diffs = [float(np.max(np.abs(a.waveform - b.waveform))) if len(a.waveform) == len(b.waveform) else float("inf")
             for a, b in zip(reference, recovered) if isinstance(b, SynthesisResult)] or [float("inf")]
    print(json.dumps({
        "gpu": torch.cuda.get_device_name(0), "precision": engine.precision, "rows": args.rows,
        "steps": args.steps, "reference_peak_gib": round(peak / 2**30, 2),
        "resident_gib": round(resident / 2**30, 2), "cap_gib": round(fraction * total / 2**30, 2),
        "learned_rows": fit.learned_rows, "too_large_alone": fit.isolated, "sentences_back": len(spoken),
        "same_lengths": all(d != float("inf") for d in diffs),
        "max_abs_waveform_diff": max(diffs), "identical": max(diffs) == 0.0,
    }, indent=2))


if __name__ == "__main__":
    main()

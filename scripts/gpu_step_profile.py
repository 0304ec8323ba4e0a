"""Where a decode step's GPU time goes: torch.profiler over eager steps at full slots.

    python scripts/gpu_step_profile.py --rows 512 --attend 320 --precision fp16
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.decode_step import StepKind, decode_step
from pipeline.engine.slots import SlotShape
from pipeline.engine.weights import write_synthetic_weights


def compare_attention_paths(engine, state, kind: StepKind) -> None:
    """One decode position through FlashAttention and through masked SDPA: same hidden states?
    (Writing the same keys/values at the same positions twice changes nothing.)"""
    from pipeline.engine import gpt as gpt_module

    gpt, space = engine._parts.gpt, engine._runner.space
    b = kind.rows
    tokens = torch.randint(0, space.vocab - 1, (b, space.codebooks), device=state.hidden.device)
    x = space.embed(tokens).unsqueeze(1).to(gpt.dtype)
    outputs = {}
    for path in ("sdpa", "triton"):
        gpt_module.DECODE_ATTENTION = path
        outputs[path] = gpt.forward_slots(x, state.rope_at[:b], state.cache, state.write_at[:b],
                                          kind.attend)[:, 0].float()
    gpt_module.DECODE_ATTENTION = "triton"
    diff = (outputs["triton"] - outputs["sdpa"]).norm() / outputs["sdpa"].norm()
    print(f"triton vs masked SDPA decode attention: relative difference {diff.item():.2e}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--attend", type=int, default=320)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        write_synthetic_weights(Path(tmp), "full", 0)
        engine = load_engine(EngineConfig(model_dir=Path(tmp), device="cuda",
                                          precision=args.precision))
        emb = engine._parts.embeddings
        runner = engine._runner
        state = runner.slots_for(SlotShape(args.rows, args.attend, 64, emb.codebooks, emb.vocab,
                                           True))
        state.write_at.fill_(args.attend - 2)
        kind = StepKind(rows=args.rows, attend=args.attend, greedy=False, penalised=True)
        for _ in range(3):
            decode_step(engine._parts.gpt, runner.space, state, kind)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                decode_step(engine._parts.gpt, runner.space, state, kind)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
        compare_attention_paths(engine, state, kind)
        runner.step(kind)  # capture
        runner.step(kind)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(50):
            runner.step(kind)
        torch.cuda.synchronize()
        per_step = (time.perf_counter() - started) / 50
        kv = args.rows * args.attend * 2 * len(engine._parts.gpt.layers) * engine._parts.gpt.hidden * 2
        print(f"graph replay: {per_step * 1e3:.3f} ms/step at {args.rows} rows x {args.attend} "
              f"positions; KV read {kv / 1e9:.2f} GB -> {kv / per_step / 1e12:.2f} TB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

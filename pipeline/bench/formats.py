"""What narrower number formats would cost in fidelity, before any kernel is written for them:
a KV cache of fewer bits than int8, and the GPT's linears in FP8 (e4m3) or int8, which an H100
or H200 multiplies natively at twice fp16's rate, each simulated in the engine's PyTorch path.

A decode step reads every live slot's whole cache (most of a step's bytes: docs/engine.md), so a
narrower cache would speed it about in proportion; FP8 or int8 inputs and weights would halve the
GEMMs' share (compute-bound at ~1,000 rows: weights alone in 8 bits would not). The
fidelity bar is the engine benchmark's (top-1 ≥ 0.995 against fp32, teacher-forced on fp32's own
tokens: ``pipeline/bench/fidelity.py``). Every row is the engine in ``--precision`` (fp16: the
GPU path's; on the CPU it gives the GPU's own fidelity figures) with the int8 cache and one change:

- ``KV int6 / int5 / int4``: keys and values with 31, 15 or 7 levels a side (one scale per vector,
  as the int8 cache keeps; ``SlotCache.levels``); ``keys int4``: the keys alone;
- ``FP8 weights``: each linear's weights rounded to e4m3 with one scale per output channel;
  ``FP8 weights and inputs``: its inputs too, one scale per row (W8A8, as ``torch._scaled_mm`` runs);
- ``int8 weights`` / ``int8 weights and inputs``: the same rounded to 127 levels a side (W8A8 as
  ``torch._int_mm`` runs, the int32 sums scaled by row and channel after).

Synthetic weights are noise, not a voice: the table ranks formats, it does not promise a real
model's figures. Everything runs on the CPU by default (~7 minutes on two cores):

    python -m pipeline.bench formats
    python -m pipeline.bench formats --format "int8 weights and inputs"   # that row alone (repeatable)
    python -m pipeline.bench formats --cpu-smoke      # tiny weights in fp32, two sentences: the flow only
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from pipeline.bench import fidelity
from pipeline.bench.protocol import forced_requests, forced_steps, make_workload, spread
from pipeline.engine import EngineConfig, kv_int8
from pipeline.engine.kv_int8 import LEVELS
from pipeline.engine.loading import load_engine
from pipeline.engine.weights import write_synthetic_weights

if TYPE_CHECKING:
    from pipeline.engine.engine import Engine

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)  # 448
INT8_MAX = 127  # symmetric: -127..127, as the int8 cache's codes
LINEARS = ("qkv", "o", "gate_up", "down")  # every GPT layer's (llama_layer.FusedLlamaLayer)
BAR = 0.995  # the engine benchmark's top-1 bar
WORKLOAD = 1024  # sentences the fidelity sample is spread over, as the engine benchmark's


@dataclass(frozen=True)
class Format:
    name: str
    key_levels: float = LEVELS
    value_levels: float = LEVELS
    linears: str | None = None  # the GPT's linears rounded to "fp8" or "int8", or as they are
    inputs: bool = False  # their input rows rounded too (W8A8), not the weights alone

    @property
    def kv_bytes(self) -> float:
        """A cached position's bytes against the int8 cache's (codes packed to their bits, the
        fp16 scale per 64-wide vector kept)."""
        bits = [math.ceil(math.log2(2 * levels + 1)) for levels in (self.key_levels, self.value_levels)]
        scale = kv_int8.scale_bytes()
        return sum(64 * b / 8 + scale for b in bits) / (2 * (64 + scale))


FORMATS = (
    Format("int8 KV (the GPU path's)"),
    Format("KV int6", 31, 31),
    Format("KV int5", 15, 15),
    Format("KV int4", 7, 7),
    Format("keys int4, values int8", 7, LEVELS),
    Format("FP8 weights", linears="fp8"),
    Format("FP8 weights and inputs", linears="fp8", inputs=True),
    Format("int8 weights", linears="int8"),
    Format("int8 weights and inputs", linears="int8", inputs=True),
)


def codes(x: torch.Tensor, kind: str, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as "int8" (symmetric, -127..127) or "fp8" (e4m3) codes with one float32 scale per
    slice along ``dim``, its largest magnitude at the format's largest code."""
    top = INT8_MAX if kind == "int8" else FP8_MAX
    scale = x.float().abs().amax(dim, keepdim=True).clamp_min(1e-12) / top
    scaled = x.float() / scale
    if kind == "int8":
        return scaled.round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8), scale
    return scaled.to(FP8), scale


def rounded(x: torch.Tensor, kind: str, dim: int) -> torch.Tensor:
    """``x`` as its ``kind`` codes (``codes``) hold it, in float32."""
    found, scale = codes(x, kind, dim)
    return found.float() * scale


class RoundedLinear(nn.Module):
    """A linear whose weights (and, with ``inputs``, each input row) are rounded to ``kind``
    ("fp8" or "int8") first, its products summed in fp32 (as the tensor cores do)."""

    def __init__(self, linear: nn.Linear, kind: str, inputs: bool) -> None:
        super().__init__()
        self.kind = kind
        self.weight = rounded(linear.weight.detach(), kind, 1)
        self.bias = None if linear.bias is None else linear.bias.detach().float()
        self.inputs = inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = rounded(x, self.kind, -1) if self.inputs else x.float()
        return nn.functional.linear(rows, self.weight, self.bias).to(x.dtype)


def apply_format(engine: Engine, form: Format) -> None:
    """Make ``engine`` (int8 cache) compute in ``form``."""
    gpt = engine.parts.gpt
    if (form.key_levels, form.value_levels) != (LEVELS, LEVELS):
        new_slot_cache = gpt.new_slot_cache
        gpt.new_slot_cache = lambda slots, positions: replace(
            new_slot_cache(slots, positions), levels=(form.key_levels, form.value_levels))
    if form.linears is not None:
        for layer in gpt.layers:
            for name in LINEARS:
                setattr(layer, name, RoundedLinear(getattr(layer, name), form.linears, form.inputs))


def measure_formats(model_dir: Path, device: str, precision: str, sentences: int, longest: int | None,
                    say: Callable[[str], None] = print,
                    formats: tuple[Format, ...] = FORMATS) -> list[tuple[Format, float, float]]:
    """(format, top-1, relative logit error) for each of ``formats``, against one fp32 reference."""
    texts = make_workload(WORKLOAD, 0)
    picked = spread(len(texts), sentences)
    steps = [min(longest or forced_steps(texts[i]), forced_steps(texts[i])) for i in picked]
    began = time.monotonic()
    reference = load_engine(EngineConfig(model_dir=model_dir, device=device, precision="fp32", kv_cache="model"))
    requests = forced_requests([texts[i] for i in picked], steps, reference.sample_voice(0), 0)
    ref = fidelity.reference_data(reference, requests)
    del reference
    say(f"reference: fp32, {len(requests)} sentences, {sum(c.shape[0] for c in ref.codes)} steps "
        f"in {time.monotonic() - began:.0f} s")
    found = []
    for form in formats:
        engine = load_engine(EngineConfig(model_dir=model_dir, device=device, precision=precision, kv_cache="int8"))
        apply_format(engine, form)
        top1, error = fidelity.logit_agreement(ref.logits, engine.score_codes(ref.requests, ref.codes))
        say(f"{form.name}: top-1 {top1:.4f}, logit error {error:.2e}")
        found.append((form, top1, error))
        del engine
    return found


def table(found: list[tuple[Format, float, float]]) -> str:
    lines = ["| format (beside the engine's precision) | top-1 | logit error | cache bytes against int8 | top-1 ≥ 0.995 |", "|---|---|---|---|---|"]
    lines += [f"| {form.name} | {top1:.4f} | {error:.2e} | {form.kv_bytes:.2f} | {'yes' if top1 >= BAR else 'no'} |"
              for form, top1, error in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench formats") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=16, help="spread over the workload (default 16, as the engine bench)")
    parser.add_argument("--longest", type=int, default=None, help="most GPT steps a sentence runs (default: its forced length)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp16", help="the engine's (default fp16: the GPU path's)")
    parser.add_argument("--format", action="append", choices=[form.name for form in FORMATS], metavar="NAME",
                        help="only this row (repeatable; default: every row)")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny weights, two short sentences")
    args = parser.parse_args(argv)
    formats = tuple(form for form in FORMATS if not args.format or form.name in args.format)
    if args.cpu_smoke:
        args.sentences, args.longest, args.device, args.precision = 2, 8, "cpu", "fp32"
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        write_synthetic_weights(Path(tmp), "tiny" if args.cpu_smoke else "full", 0)
        found = measure_formats(Path(tmp), args.device, args.precision, args.sentences, args.longest,
                                formats=formats)
    print(table(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Do CUDA-graph decode steps and continuous batching give the eager loop's tokens?

One pool of mixed-length sentences (greedy, and sampled with EOS allowed) runs three ways: eager
with every row in its own slot, graphs with every row in its own slot, and graphs with fewer
slots than rows (refills). Prints each way's time and token agreement; exits 1 when graphs with a
slot per row agree on fewer than 95 % of the rows. Refills change the batch's shape step by step:
in fp16 that flips argmaxes on random weights' near-flat logits, and a flipped row differs from
there on (on an H200 ~35-40 % of fp16 rows stay identical), so refills are held to the eager
tokens in fp32 (``tests/gpu/test_gpu_graph_check.py``, on a GPU machine).

    python -m pipeline.bench graph-check --rows 256 --slots 64 --precision fp16
    python -m pipeline.bench graph-check --cpu-smoke    # tiny weights on the CPU: refills only

SYNTHETIC weights (noise, never speech). On a CPU there are no graphs: the ways differ only in
their slots.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from pipeline.engine import Engine, EngineConfig, load_engine
from pipeline.engine.weights import write_synthetic_weights
from pipeline.types import SynthesisRequest

AGREEMENT_NEEDED = 0.95
ONE_SLOT_PER_ROW = "graphs, a slot per row"


@dataclass(frozen=True)
class Way:
    """One way through the pool, against the eager loop with a slot per row."""

    sampling: str  # greedy or sampled
    label: str
    identical_rows: int
    rows: int
    tokens: int
    seconds: float
    eager_seconds: float
    graphs_captured: int

    @property
    def agreement(self) -> float:
        return self.identical_rows / self.rows

    def line(self) -> str:
        return (f"{self.sampling} | {self.label}: {self.identical_rows}/{self.rows} rows identical to "
                f"eager; {self.tokens} tokens in {self.seconds:.2f} s (eager {self.eager_seconds:.2f} s); "
                f"graphs captured {self.graphs_captured}")


def pool(engine: Engine, rows: int, greedy: bool, longest: int = 280) -> list[SynthesisRequest]:
    rng = random.Random(1)
    voice = engine.sample_voice(0)
    out = []
    for i in range(rows):
        steps = rng.randint(longest // 7, longest)
        out.append(SynthesisRequest(text="今天天气很好" * rng.randint(1, 5), voice=voice, seed=i,
                                    max_new_tokens=steps, min_new_tokens=steps if greedy else steps // 2,
                                    top_k=1 if greedy else 20))
    return out


def timed_codes(engine: Engine, requests: list[SynthesisRequest], slots: int | None,
                graphs: bool) -> tuple[list[torch.Tensor], float]:
    engine.release_slots()
    engine.step_runner.use_graphs = graphs and torch.cuda.is_available()
    engine.slots = slots
    engine.generate_codes(requests[:8])  # allocate, capture what this shape needs
    sync()
    started = time.perf_counter()
    codes = engine.generate_codes(requests)
    sync()
    return codes, time.perf_counter() - started


def compare_ways(engine: Engine, rows: int, slots: int, longest: int = 280) -> list[Way]:
    """Both samplings, each through the two graph ways, against eager with a slot per row."""
    found = []
    for greedy in (True, False):
        requests = pool(engine, rows, greedy, longest)
        reference, eager_s = timed_codes(engine, requests, None, graphs=False)
        for label, way_slots in ((ONE_SLOT_PER_ROW, None), (f"graphs, {slots} slots", slots)):
            codes, seconds = timed_codes(engine, requests, way_slots, graphs=True)
            found.append(Way(sampling="greedy" if greedy else "sampled", label=label,
                             identical_rows=sum(torch.equal(a, b) for a, b in zip(codes, reference)),
                             rows=len(reference), tokens=sum(c.shape[0] for c in codes), seconds=seconds,
                             eager_seconds=eager_s, graphs_captured=engine.step_runner.captured))
    return found


def synthetic_engine(folder: Path, size: str, device: str, precision: str) -> Engine:
    write_synthetic_weights(folder, size, 0)
    return load_engine(EngineConfig(model_dir=folder, device=device, precision=precision))


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench graph-check") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default="full", choices=("tiny", "full"))
    parser.add_argument("--longest", type=int, default=280, help="most tokens of a sentence (default 280)")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny weights on the CPU, 6 short rows in 2 slots: the flow, no measure")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.rows, args.slots, args.longest = 6, 2, 21
        args.precision, args.device, args.size = "fp32", "cpu", "tiny"
    with tempfile.TemporaryDirectory() as tmp:
        engine = synthetic_engine(Path(tmp), args.size, args.device, args.precision)
        ways = compare_ways(engine, args.rows, args.slots, args.longest)
    for way in ways:
        print(way.line())
    return 0 if all(way.agreement >= AGREEMENT_NEEDED for way in ways if way.label == ONE_SLOT_PER_ROW) else 1

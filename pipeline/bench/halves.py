"""Would two half-pools of slots, stepped on two streams at once, beat one pool stepped alone?

A decode step at ~1,000 rows is two kinds of work taking turns on one stream: the GEMMs (0.74 ms
of a 2.1-ms step on an H200, compute-bound) and the word attention over the int8 cache (~1 ms,
bandwidth-bound). The two halves of a pool share nothing within a step (each slot attends only its
own cache), so each half's layers can run as a chain of its own on a stream of its own: one half's
attention beside the other's GEMMs. Smaller GEMMs are less efficient, and the GPU schedules
blocks, not halves, so whether the overlap pays is measured here before any engine code:

    python -m pipeline.bench halves                   # 1,024 rows, slots of 80..320 positions
    python -m pipeline.bench halves --rows 512 --attend 256
    python -m pipeline.bench halves --cpu-smoke       # tiny shapes on the CPU: the flow only

A layer here is the step's four GEMMs (qkv, o, gate_up, down) and the engine's word attention over
an int8 cache of random codes and lengths (``attend // 4 .. attend``); norms, SiLU and sampling
are left out (~0.2 ms of a step, the same for every row). Each way is the model's layers captured
as one CUDA graph (two streams forked and joined inside it) and replayed: ms a step.

On an H100 (2026-12-07) the two streams at once took 1.03x one stream's time: the word kernel's
programs fill every SM, so a GEMM launched beside it waits for SMs to drain. ``--leave N``
(default 33 and 66) adds the halves with cuBLAS told to leave N SMs free of each GEMM (the SM
carveout): does the other half's attention then run on the SMs left, and at what cost to the GEMMs?
``--on-sms N`` (default 66 and 88) keeps the attention itself to N SMs (``attention_on_sms.py``)
and its GEMMs to the rest: the attention alone that way, and the two halves at once. The H100's
answers: the carveout changed nothing (3.30 ms again); the attention alone, 24 programs an SM,
took 2.30 / 2.31 / 2.39-2.42 ms on 132 / 88 / 66 SMs against 2.25 on all (8 programs an SM: 2.52 /
3.11 / 3.94), yet the halves with their GEMMs carved out 3.42-3.54 against one stream's 3.22: the
GEMMs did not keep off the attention's SMs. ``--green N`` puts the GEMMs on a green context of N
SMs instead and interleaves the halves there (``sm_split.py``; ``--green-graphed``: as one graph,
``--disjoint``: the attention on a green context of its own): 3.30 ms at best against 3.29.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from pipeline.bench.gpu_timing import graphed_seconds_per_run
from pipeline.bench.linears import HIDDEN, INTERMEDIATE, LAYERS, layer_gemms, layer_weights
from pipeline.engine.streams import forked

HEADS, HEAD_DIM = 12, 64


def layers_of(rows: int, attend: int, weights: dict[str, torch.Tensor], layers: int, heads: int, dim: int,
              device: torch.device, sms: int | None = None
              ) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The model's layers for ``rows`` slots with ``weights`` (one layer's, read by every layer, as
    the engine's halves read the same model): (all of each layer, its GEMMs alone, its attention
    alone); ``sms``: the attention kept to that many SMs (``attention_on_sms``)."""
    qkv, rest = layer_gemms(rows, weights, device)
    from pipeline.bench.attention_on_sms import first_sms, layer_attention

    attend_once = layer_attention(rows, attend, heads, dim, device, None if sms is None else first_sms(sms, device))

    def gemms(attended: torch.Tensor | None) -> None:
        qkv()
        rest(attended)

    def whole() -> None:
        for _ in range(layers):
            gemms(attend_once())

    def gemms_alone() -> None:
        for _ in range(layers):
            gemms(None)

    def attention_alone() -> None:
        for _ in range(layers):
            attend_once()

    return whole, gemms_alone, attention_alone


def side_by_side(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    """``first`` on the current stream and ``second`` on a side stream, both started at once and
    joined at the end (the fork and join are captured into the graph with them)."""
    if not torch.cuda.is_available():
        return lambda: (first(), second())  # type: ignore[func-returns-value]
    side = torch.cuda.Stream()

    def both() -> None:
        with forked(side):
            with torch.cuda.stream(side):
                second()
            first()

    return both


def leaving(sms: int, run: Callable[[], None]) -> Callable[[], None]:
    """``run`` with every cuBLAS GEMM it launches told to leave ``sms`` SMs free (set while it is
    captured, so its graph keeps the GEMMs' smaller grids); the setting before is put back."""

    def carved() -> None:
        before = torch._C._get_sm_carveout_experimental()
        torch._C._set_sm_carveout_experimental(sms)
        try:
            run()
        finally:
            torch._C._set_sm_carveout_experimental(before)

    return carved


def ways(rows: int, attend: int, hidden: int, intermediate: int, layers: int, heads: int,
         dim: int, device: torch.device, leave: tuple[int, ...] = (),
         on_sms: tuple[int, ...] = ()) -> dict[str, Callable[[], None]]:
    """Each way to run a step's layers for ``rows`` slots, by the name its row of the table has."""
    weights = layer_weights(hidden, intermediate, device)
    whole, gemms, attended = layers_of(rows, attend, weights, layers, heads, dim, device)
    half = rows // 2
    first, _, _ = layers_of(half, attend, weights, layers, heads, dim, device)
    second, _, _ = layers_of(half, attend, weights, layers, heads, dim, device)
    return {
        f"{rows} rows on one stream (the engine's way)": whole,
        f"its GEMMs alone ({rows} rows)": gemms,
        f"its attention alone ({rows} slots)": attended,
        f"two halves of {half}, one after the other": lambda: (first(), second()),  # type: ignore[func-returns-value]
        f"two halves of {half} on two streams at once": side_by_side(first, second),
    } | {way: run for sms in leave for way, run in (
        (f"its GEMMs alone, leaving {sms} SMs", leaving(sms, gemms)),
        (f"two halves at once, their GEMMs leaving {sms} SMs", leaving(sms, side_by_side(first, second))))
    } | {way: run for sms in on_sms for way, run in sharing(sms, rows, attend, weights, layers, heads, dim, device)}


def sharing(sms: int, rows: int, attend: int, weights: dict[str, torch.Tensor], layers: int, heads: int,
            dim: int, device: torch.device) -> list[tuple[str, Callable[[], None]]]:
    """The ways with the attention kept to ``sms`` SMs: alone (does it still read near the copy
    ceiling?), and two halves at once with their GEMMs leaving it those SMs."""
    _, _, attended = layers_of(rows, attend, weights, layers, heads, dim, device, sms)
    first, _, _ = layers_of(rows // 2, attend, weights, layers, heads, dim, device, sms)
    second, _, _ = layers_of(rows // 2, attend, weights, layers, heads, dim, device, sms)
    return [(f"its attention alone, on {sms} SMs", attended),
            (f"two halves at once, attention on {sms} SMs, GEMMs on the rest", leaving(sms, side_by_side(first, second)))]


def green_timed(green: list[int], shape: tuple[int, ...], device: torch.device, graphed: bool = False,
                disjoint: bool = False) -> dict[str, float]:
    """The green-context ways (``sm_split.py``), timed as the rows they stand beside: eagerly,
    after one stream's layers timed eagerly too (each way's host time to enqueue a step printed,
    so a host-bound figure shows as one), or captured as one CUDA graph with ``graphed`` (beside
    the table's own one stream); ``disjoint``: the attention on a green context of its own
    (``disjoint_ways``). None on a CPU or where green contexts are not to be had."""
    if not green or device.type != "cuda":
        return {}
    from pipeline.bench.sm_split import disjoint_ways, green_ways

    rows, attend, hidden, intermediate, layers, heads, dim = shape
    weights = layer_weights(hidden, intermediate, device)
    found = []
    if not graphed:
        found.append((f"{rows} rows on one stream (eager)", layers_of(rows, attend, weights, layers, heads, dim, device)[0]))
    for sms in green:
        try:
            found += (disjoint_ways if disjoint else green_ways)(sms, rows, attend, weights, layers, heads, dim, device)
        except (RuntimeError, AttributeError, ImportError) as error:  # no green contexts in this torch, driver or card
            print(f"halves: no green context of {sms} SMs here ({error})")
    return {name: _timed(name, run, graphed) for name, run in found}


def _timed(name: str, run: Callable[[], None], graphed: bool) -> float:
    from pipeline.bench.gpu_timing import seconds_per_run

    if graphed:
        return graphed_seconds_per_run(run, repeats=5)
    seconds = seconds_per_run(run, repeats=5)
    torch.cuda.synchronize()
    started = time.perf_counter()
    run()
    print(f"halves: {name}: {(time.perf_counter() - started) * 1e3:.2f} ms of host time to enqueue, "
          f"{seconds * 1e3:.2f} ms on the GPU")
    torch.cuda.synchronize()
    return seconds


def table(timed: dict[str, float]) -> list[str]:
    baseline = next(iter(timed.values()))
    lines = ["| way | ms a step | against one stream |", "|---|---|---|"]
    lines += [f"| {name} | {seconds * 1e3:.3f} | {seconds / baseline:.2f} |" for name, seconds in timed.items()]
    return lines


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench halves") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1024, help="slots in the pool (default 1024)")
    parser.add_argument("--attend", type=int, default=320, help="the longest slot's positions (default 320)")
    parser.add_argument("--leave", type=int, nargs="*", default=[33, 66],
                        help="SMs each GEMM leaves free in the carveout ways (default 33 66; none: no such ways)")
    parser.add_argument("--on-sms", type=int, nargs="*", default=[66, 88],
                        help="SMs the attention is kept to in the sharing ways (default 66 88; none: no such ways)")
    parser.add_argument("--green", type=int, nargs="*", default=[],
                        help="SMs of a green context that runs the GEMMs, the attention on the others (sm_split.py; "
                             "timed eagerly; default none)")
    parser.add_argument("--green-graphed", action="store_true",
                        help="the green ways captured as one CUDA graph instead of eagerly")
    parser.add_argument("--disjoint", action="store_true",
                        help="the attention on a green context of its own, the SMs the GEMMs' context does not hold "
                             "(the driver's split through cuda.bindings)")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU: the flow only")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        shape, device = (8, 16, 64, 128, 2, 4, 16), torch.device("cpu")
    else:
        if not torch.cuda.is_available():
            print("halves: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow")
            return 2
        shape = (args.rows, args.attend, HIDDEN, INTERMEDIATE, LAYERS, HEADS, HEAD_DIM)
        device = torch.device("cuda")
    with torch.inference_mode():
        timed = {name: graphed_seconds_per_run(run, repeats=1 if args.cpu_smoke else 5)
                 for name, run in ways(*shape, device, tuple(args.leave), tuple(args.on_sms)).items()}
        timed |= green_timed(args.green, shape, device, args.green_graphed, args.disjoint)
    where = torch.cuda.get_device_name() if device.type == "cuda" else "the CPU (the flow only, wall time)"
    print(f"a step's layers ({shape[4]}: GEMMs and attention) for {shape[0]} slots of "
          f"{shape[1] // 4}..{shape[1]} positions on {where}")
    print("\n".join(table(timed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

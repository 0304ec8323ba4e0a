"""The GPT's four linears at a decode step's shapes, timed in each number format the tensor cores
take: fp16 (what the engine runs), int8 inputs and weights (``torch._int_mm``, twice fp16's peak
on an H100 or H200; its int32 sums still to be scaled by row and channel) and FP8 with row and
channel scales (``torch._scaled_mm``, the scaling in its epilogue). At ~1,000 rows the GEMMs are
compute-bound (0.74 ms of a 2.1-ms step on the H200), so the question before any kernel is
written: how much of the 2x do these shapes get? ``formats`` says what each costs in fidelity.

    python -m pipeline.bench linears                      # 256, 512 and 1,024 rows, on the GPU
    python -m pipeline.bench linears --rows 1024 --rows 2048
    python -m pipeline.bench linears --cpu-smoke          # tiny shapes on the CPU: the flow only

Rows: µs per GEMM (CUDA events over 50 runs replayed as one CUDA graph: a GEMM of these shapes
takes less than a launch from Python), int8's with the scaling done by PyTorch ops after it
(an unfused upper bound: a kernel reading the int32 sums would fold it in), and a step's sum
over the model's layers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from pipeline.bench.formats import codes
from pipeline.bench.gpu_timing import graphed_seconds_per_run

HIDDEN, INTERMEDIATE, LAYERS = 768, 3072, 20  # ChatTTS's GPT (weights.py, "full")


def shapes(hidden: int, intermediate: int) -> dict[str, tuple[int, int]]:
    """(in, out) features of each fused linear of a layer (llama_layer.FusedLlamaLayer)."""
    return {"qkv": (hidden, 3 * hidden), "o": (hidden, hidden), "gate_up": (hidden, 2 * intermediate),
            "down": (intermediate, hidden)}


def runners(rows: int, features: tuple[int, int], device: torch.device) -> dict[str, Callable[[], torch.Tensor]]:
    """Each format's GEMM of ``rows`` input rows by a linear of ``features``."""
    k, n = features
    x = torch.randn(rows, k, device=device, dtype=torch.float16)
    weight = torch.randn(n, k, device=device, dtype=torch.float16) / k**0.5
    x8, x_scale = codes(x, "int8", -1)  # a scale per row
    w8, w_scale = codes(weight, "int8", -1)  # [N, K]: a scale per output channel
    found: dict[str, Callable[[], torch.Tensor]] = {
        "fp16": lambda: torch.nn.functional.linear(x, weight),
        "int8": lambda: torch._int_mm(x8, w8.t()),
        "int8 + scaling": lambda: (torch._int_mm(x8, w8.t()) * x_scale * w_scale.t()).half(),
    }
    if device.type == "cuda":  # row-wise scales: CUDA only
        xf, xf_scale = codes(x, "fp8", -1)
        wf, wf_scale = codes(weight, "fp8", -1)
        found["fp8 (scales in its epilogue)"] = lambda: torch._scaled_mm(
            xf, wf.t(), scale_a=xf_scale, scale_b=wf_scale.t(), out_dtype=torch.float16)
    return found


def measure(rows_list: list[int], hidden: int, intermediate: int, device: torch.device,
            repeats: int) -> list[tuple[int, str, str, float]]:
    """(rows, linear, format, seconds) for every combination."""
    found = []
    for rows in rows_list:
        for name, features in shapes(hidden, intermediate).items():
            for form, run in runners(rows, features, device).items():
                found.append((rows, name, form, graphed_seconds_per_run(run, repeats=repeats)))
    return found


def table(found: list[tuple[int, str, str, float]], hidden: int, intermediate: int, layers: int) -> list[str]:
    forms = list(dict.fromkeys(form for _, _, form, _ in found))
    names = list(shapes(hidden, intermediate))
    by = {(rows, name, form): seconds for rows, name, form, seconds in found}
    lines = ["| rows | linear | " + " | ".join(f"{form} µs" for form in forms) + " | int8 / fp16 |",
             "|---" * (len(forms) + 3) + "|"]
    for rows in dict.fromkeys(rows for rows, _, _, _ in found):
        per_linear = {name: [by[rows, name, form] for form in forms] for name in names}
        step = [layers * sum(times[i] for times in per_linear.values()) for i in range(len(forms))]
        for name, times in [*per_linear.items(), (f"a step ({layers} layers)", step)]:
            ratio = times[forms.index("int8")] / times[forms.index("fp16")]
            lines.append(f"| {rows} | {name} | " + " | ".join(f"{t * 1e6:.1f}" for t in times) + f" | {ratio:.2f} |")
    return lines


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench linears") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="input rows (repeatable; default 256, 512, 1024)")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU: the flow only")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        rows, hidden, intermediate, layers, device = [32], 64, 128, 2, torch.device("cpu")
    else:
        if not torch.cuda.is_available():
            print("linears: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow")
            return 2
        rows, hidden, intermediate, layers = args.rows or [256, 512, 1024], HIDDEN, INTERMEDIATE, LAYERS
        device = torch.device("cuda")
    with torch.inference_mode():
        found = measure(rows, hidden, intermediate, device, repeats=3 if args.cpu_smoke else 50)
    name = f"{torch.cuda.get_device_name()}: µs per GEMM (CUDA events, graph replays)" if device.type == "cuda" else \
        "the CPU (the flow only, wall µs)"
    print(f"the GPT's linears by number format on {name}")
    print("\n".join(table(found, hidden, intermediate, layers)))
    return 0


def layer_weights(hidden: int, intermediate: int, device: torch.device) -> dict[str, torch.Tensor]:
    """One layer's four GEMM weights, random, by name (every layer here reads the same)."""
    return {name: torch.randn(n, k, device=device, dtype=torch.float16) / k**0.5
            for name, (k, n) in shapes(hidden, intermediate).items()}


def layer_gemms(rows: int, weights: dict[str, torch.Tensor], device: torch.device
                ) -> tuple[Callable[[], None], Callable[[torch.Tensor | None], None]]:
    """A layer's GEMMs for ``rows`` rows, in the two parts the attention comes between: the qkv
    projection, and the o, gate_up and down projections of the attention's output (None: of the
    layer's own input, for the GEMMs alone)."""
    hidden, intermediate = weights["o"].shape[0], weights["down"].shape[1]
    x = torch.randn(rows, hidden, device=device, dtype=torch.float16)

    def qkv() -> None:
        torch.nn.functional.linear(x, weights["qkv"])

    def rest(attended: torch.Tensor | None) -> None:
        mixed = torch.nn.functional.linear(x if attended is None else attended.reshape(rows, hidden), weights["o"])
        gate_up = torch.nn.functional.linear(mixed, weights["gate_up"])
        torch.nn.functional.linear(gate_up[:, :intermediate], weights["down"])

    return qkv, rest


if __name__ == "__main__":
    raise SystemExit(main())

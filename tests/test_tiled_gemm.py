"""The decode step's small-tile GEMM (pipeline/engine/tiled_gemm.py), off until measured: under
Triton's interpreter its answer is the fp32 product at the o and down shapes with part-filled
tiles (a weight read untransposed or a tile's depth skipped gives errors of order one), and off it
changes nothing (the layer itself runs)."""

from __future__ import annotations

import pytest

from tests.test_engine_kernels import worst_error_under_the_interpreter

CHECK = """
import torch
from pipeline.bench.gemm_shapes import worst_error
cases = ((70, (64, 128, 128, 4, 1), "down"), (3, (32, 64, 64, 4, 1), "o"), (70, (16, 32, 128, 4, 1), "o"))
print(max(worst_error(torch.device("cpu"), rows, tile, name) for rows, tile, name in cases))
"""


def test_the_kernel_gives_the_product_at_the_steps_shapes() -> None:
    assert worst_error_under_the_interpreter(CHECK) < 1e-3


def test_off_or_on_a_cpu_the_layer_itself_runs() -> None:
    torch = pytest.importorskip("torch")
    import pipeline.engine.tiled_gemm as tiled_gemm

    layer = torch.nn.Linear(128, 64, bias=False)
    x = torch.randn(3, 5, 128)
    assert not tiled_gemm.ON  # the default until a GPU measures it
    tiled_gemm.ON = True
    try:
        assert torch.equal(tiled_gemm.linear(layer, x), layer(x))  # a CPU tensor: no kernel launch
    finally:
        tiled_gemm.ON = False


def test_the_kernel_compiles_for_hopper_without_spilling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Triton's own ptxas, for sm_90 on any machine, at the engine's tile and the down linear's depth."""
    from tests.test_engine_kernels import compiled_for_hopper

    code = compiled_for_hopper(tmp_path, "--gemm")["o and down, small tiles"]
    assert code["spills"] == 0 and code["registers"] <= 128

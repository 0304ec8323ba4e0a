"""On a GPU, the decode step's small-tile GEMM (pipeline/engine/tiled_gemm.py) gives the fp32 product
at the o and down shapes (within fp16 rounding), and the GPT's linears take it only where it is on and the
product is a decode step's (a prefill's positions keep cuBLAS)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import pipeline.engine.tiled_gemm as tiled_gemm  # noqa: E402
from pipeline.bench.gemm_shapes import TILES, worst_error  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("tile", TILES)
def test_every_measured_tile_gives_the_fp32_product(tile: tuple[int, ...]) -> None:
    for name in ("o", "down"):
        for rows in (1, 70, 1024):
            assert worst_error(torch.device("cuda"), rows, tile, name) <= 1e-2, (tile, rows, name)


def test_the_linears_take_the_kernel_only_when_on_and_for_a_decode_steps_rows() -> None:
    layer = torch.nn.Linear(3072, 768, bias=False, device="cuda", dtype=torch.half)
    step, prefill = (torch.randn(n, 1, 3072, device="cuda").half() for n in (512, tiled_gemm.MOST_ROWS + 64))
    kernel = torch.empty(512, 768, device="cuda", dtype=torch.half)
    tiled_gemm.tiled_mm(step.view(512, 3072), layer.weight, kernel)
    try:
        tiled_gemm.ON = True
        assert torch.equal(tiled_gemm.linear(layer, step).view(512, 768), kernel)
        assert torch.equal(tiled_gemm.linear(layer, prefill), layer(prefill))
    finally:
        tiled_gemm.ON = False
    assert torch.equal(tiled_gemm.linear(layer, step), layer(step))

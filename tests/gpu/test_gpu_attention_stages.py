"""On a GPU, the decode attention kernel with its loads pipelined (``STAGES`` 2 or 3, a
``tl.range`` loop the CPU interpreter cannot run) attends exactly as the while loop does: each
slot over its own first ``used`` positions (1, a block's edge, the whole cache), from a
half-precision and from an int8 cache."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import pipeline.engine.decode_attention as da

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("quantized", [False, True])
def test_pipelined_loads_attend_as_the_while_loop_does(stages: int, quantized: bool, monkeypatch: Any) -> None:
    generator = torch.Generator(device="cuda").manual_seed(7)
    rows, heads, positions, dim = 9, 12, 200, 64
    used = torch.tensor([1, 31, 32, 33, 64, 100, 199, 200, 2], dtype=torch.int32, device="cuda")
    query = torch.randn(rows, heads, dim, device="cuda", dtype=torch.float16, generator=generator)
    shape = (rows, heads, positions, dim)
    if quantized:
        keys = torch.randint(-127, 128, shape, device="cuda", dtype=torch.int8, generator=generator)
        values = torch.randint(-127, 128, shape, device="cuda", dtype=torch.int8, generator=generator)
        scales = (torch.rand(shape[:3], device="cuda", generator=generator) / 64,
                  torch.rand(shape[:3], device="cuda", generator=generator) / 64)
    else:
        keys = torch.randn(shape, device="cuda", dtype=torch.float16, generator=generator)
        values = torch.randn(shape, device="cuda", dtype=torch.float16, generator=generator)
        scales = (None, None)

    monkeypatch.setattr(da, "STAGES", 1)
    looped = da.decode_attention(query, keys, values, used, *scales)
    monkeypatch.setattr(da, "STAGES", stages)
    pipelined = da.decode_attention(query, keys, values, used, *scales)

    torch.testing.assert_close(pipelined.float(), looped.float(), atol=2e-3, rtol=2e-3)

"""On a GPU, the compiled fused sampling kernel (pipeline/engine/fused_sampling.py) draws the
tokens the PyTorch ops draw, at ChatTTS's own vocabulary (626 codes a codebook, 4 codebooks)."""

from __future__ import annotations

import pytest

from tests.fused_sampling_cases import disagreements

pytestmark = pytest.mark.gpu


def test_the_compiled_kernel_draws_the_tokens_the_pytorch_ops_draw() -> None:
    differing, total = disagreements("cuda", vocab=626, rows=6, codebooks=4)
    assert total == 4 * 3 * 6 * 4
    assert differing == 0

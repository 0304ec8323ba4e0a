"""The int8 KV cache's format (``kv_int8.py``): codes and an fp16 scale per vector that rebuild
each vector to within half a step, whatever its magnitude, with no NaN for a vector of zeros."""

from __future__ import annotations

import torch

from pipeline.engine import kv_int8


def test_each_vector_comes_back_within_half_a_step_of_its_own_largest_value() -> None:
    generator = torch.Generator().manual_seed(3)
    magnitudes = torch.tensor([1e-9, 1e-5, 3e-3, 0.7, 12.0, 900.0])[:, None, None]
    x = torch.randn(6, 5, 64, generator=generator) * magnitudes
    codes, scales = kv_int8.quantize(x)

    assert codes.dtype == torch.int8 and scales.dtype == torch.float16
    back = kv_int8.dequantize(codes, scales, torch.float32)
    step = scales.float().unsqueeze(-1)
    assert ((back - x).abs() <= step / 2 * (1 + 1e-3)).all()
    largest = x.abs().amax(-1)
    big = largest >= 127 * kv_int8.SMALLEST_STEP
    # the largest element of every vector above the smallest step keeps the full 7 bits
    assert (codes.abs().amax(-1)[big] == 127).all()
    assert (scales.float()[~big] == kv_int8.SMALLEST_STEP).all()  # never smaller: fp16 keeps it exact


def test_a_vector_of_zeros_is_zeros_not_nan() -> None:
    codes, scales = kv_int8.quantize(torch.zeros(2, 64))
    assert (codes == 0).all() and (scales.float() > 0).all()
    assert torch.equal(kv_int8.dequantize(codes, scales, torch.float16), torch.zeros(2, 64, dtype=torch.float16))


def test_the_scale_is_two_bytes_of_a_cached_vectors_sixty_six() -> None:
    assert kv_int8.scale_bytes() == 2

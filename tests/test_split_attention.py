"""The split-K decode attention (pipeline/engine/split_attention.py) under Triton's CPU
interpreter: the same attention as the one-program-per-(slot, head) kernel and as plain PyTorch,
from half-precision and int8 caches, for lengths at and around the partition edges."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPLIT_CHECK = r"""
import torch
import pipeline.engine.decode_attention as da
import pipeline.engine.kv_int8 as kv_int8
import pipeline.engine.split_attention as sa
from tests.attention_reference import reference_attention

torch.manual_seed(5)
B, H, P, D = 7, 2, 100, 64
# 1, a block edge, a partition edge and one past it, a ragged end, the whole cache
used = torch.tensor([1, 32, 64, 65, 77, 99, 100], dtype=torch.int32)
q = torch.randn(B, H, D).half()
k, v = (torch.randn(B, H, P, D) * 2).half(), torch.randn(B, H, P, D).half()


def reference(keys, values):
    return reference_attention(q, keys, values, used)

(kq, ks), (vq, vs) = kv_int8.quantize(k), kv_int8.quantize(v)
cases = {"fp16": ((k, v, None, None), reference(k, v)),
         "int8": ((kq, vq, ks, vs), reference(kv_int8.dequantize(kq, ks, torch.float32),
                                              kv_int8.dequantize(vq, vs, torch.float32)))}
worst = 0.0
for name, (tensors, want) in cases.items():
    single = da.decode_attention(q, tensors[0], tensors[1], used, *tensors[2:], kernel="single")
    # fewer programs than partitions (2, 3): each program takes every 2nd / 3rd partition
    for partition, splits in ((16, 8), (16, 3), (32, 2), (32, 8), (64, 8), (128, 8)):
        sa.MAX_SPLITS = splits
        got = da.decode_attention(q, tensors[0], tensors[1], used, *tensors[2:], kernel="split",
                                  partition=partition)
        assert got.shape == q.shape and got.dtype == q.dtype, (got.shape, got.dtype)
        assert torch.isfinite(got).all(), (name, partition)
        worst = max(worst, (got.float() - want).abs().max().item(),
                    (got.float() - single.float()).abs().max().item())
try:
    da.decode_attention(q, k, v, used, kernel="split", partition=48)
except ValueError as error:
    assert "whole number" in str(error)
else:
    raise AssertionError("a partition of 48 positions (1.5 blocks) was accepted")
try:
    da.decode_attention(q, k, v, used, kernel="tiled")
except ValueError as error:
    assert "single" in str(error) and "split" in str(error)
else:
    raise AssertionError("an unknown kernel name was accepted")
print(worst)
"""


def test_split_attention_matches_the_single_program_kernel_and_pytorch() -> None:
    """Partitions of 16-128 positions (fewer, equal to and more than a slot's length; a last
    partition cut short), one program per partition or fewer programs each taking every n-th,
    combine to the attention of the whole prefix, from either cache."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", SPLIT_CHECK], env=env, capture_output=True,
                          text=True, timeout=600, check=False, cwd=ROOT)  # imports tests.attention_reference
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.strip().splitlines()[-1]) < 2e-3


def test_the_default_kernel_is_the_one_measured_fastest_the_word_kernel() -> None:
    import pipeline.engine.decode_attention as da

    assert da.KERNEL == "words" and set(da.KERNELS) == {"single", "split", "words"}

"""The GPU path's kernels checked on the CPU under Triton's interpreter (decode attention over the
int8 cache, the fused layer kernels) against PyTorch, and the shapes grown slots take."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL_CHECK = """
import torch
from pipeline.engine import decode_attention as da, kv_int8
from tests.attention_reference import reference_attention
torch.manual_seed(0)
B, P, H, D = 6, 200, 3, 64
q = torch.randn(B, H, D).half()
k = torch.randn(B, H, P, D).half()
v = torch.randn(B, H, P, D).half()
used = torch.tensor([1, 63, 64, 65, 130, 200], dtype=torch.int32)

def reference(keys, values):
    return reference_attention(q, keys, values, used)

worst = (da.decode_attention(q, k, v, used).float() - reference(k, v)).abs().max().item()
# int8 cache: the kernel against the same attention over the dequantized cache
(kq, ks), (vq, vs) = kv_int8.quantize(k), kv_int8.quantize(v)
got = da.decode_attention(q, kq, vq, used, ks, vs, kernel="single").float()
want = reference(kv_int8.dequantize(kq, ks, torch.float32), kv_int8.dequantize(vq, vs, torch.float32))
worst = max(worst, (got - want).abs().max().item())
# ... its codes made floats by their bits: the same output, bit for bit (the codes' extremes too)
kq[0, 0, 0, :2], vq[0, 0, 0, :2] = torch.tensor([-128, 127], dtype=torch.int8), torch.tensor([127, -128], dtype=torch.int8)
da.INT8_BITS = False
by_conversion = da.decode_attention(q, kq, vq, used, ks, vs, kernel="single")
da.INT8_BITS = True
by_bits = da.decode_attention(q, kq, vq, used, ks, vs, kernel="single")
assert torch.equal(by_bits, by_conversion), (by_bits - by_conversion).abs().max()

# RoPE + cache write against the PyTorch path (rotate_half), each slot at its own position
from pipeline.engine.layer_ops import apply_rope as _apply_rope
from pipeline.engine.layer_ops import rms_scale as _rms_scale
qkv = torch.randn(B, 3 * H * D).half()
residual = (torch.randn(B, H * D) * torch.arange(1, B + 1)[:, None]).half()  # the raw rows qkv is of
angles = torch.arange(P).float()[:, None] / (10000 ** (torch.arange(D // 2).float() / (D // 2)))
table_cos, table_sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
at = torch.tensor([0, 5, 63, 64, 100, 199])
keys, values = torch.zeros(B, H, P, D).half(), torch.zeros(B, H, P, D).half()
query = da.rope_and_store(qkv, residual, 1e-5, table_cos[at], table_sin[at], keys, values, at)
parts = (qkv.float() * _rms_scale(residual, 1e-5)).view(B, 3, H, D)  # normalised by each row's RMS
cos, sin = table_cos[at][:, None, :], table_sin[at][:, None, :]
rows = torch.arange(B)
want_k, want_v = _apply_rope(parts[:, 1], cos, sin), parts[:, 2]
for got, want in ((query.float(), _apply_rope(parts[:, 0], cos, sin)),
                  (keys[rows, :, at].float(), want_k), (values[rows, :, at].float(), want_v)):
    worst = max(worst, (got - want).abs().max().item())
untouched = keys.clone()
untouched[rows, :, at] = 0
worst = max(worst, untouched.abs().max().item())  # nothing written anywhere else

# ... and into an int8 cache: the same codes and scales as kv_int8.quantize of the rotated key
keys8, values8 = torch.zeros(B, H, P, D, dtype=torch.int8), torch.zeros(B, H, P, D, dtype=torch.int8)
kscale, vscale = torch.zeros(B, H, P, dtype=kv_int8.SCALE_DTYPE), torch.zeros(B, H, P, dtype=kv_int8.SCALE_DTYPE)
da.rope_and_store(qkv, residual, 1e-5, table_cos[at], table_sin[at], keys8, values8, at, kscale, vscale)
for cache, scales, want in ((keys8, kscale, want_k), (values8, vscale, want_v)):
    codes, steps = kv_int8.quantize(want)
    worst = max(worst, (cache[rows, :, at].int() - codes.int()).abs().max().item() / 1000,
                (scales[rows, :, at] - steps).abs().max().item())
    assert (cache[rows, :, at].int() - codes.int()).abs().max().item() <= 1
    written = torch.zeros(B, H, P, dtype=torch.bool)
    written[rows, :, at] = True
    assert scales[~written].abs().max().item() == 0.0

# admission of a left-padded prefill into slots: the kernel against the PyTorch path
from pipeline.engine.kv_cache import SlotCache
prefilled = torch.randn(3, H, 40, D).half()
lengths, slots = torch.tensor([40, 7, 33]), torch.tensor([4, 0, 2])
for quantized in (False, True):
    def empty():
        dtype = torch.int8 if quantized else torch.float16
        return SlotCache(keys=[torch.zeros(B, H, P, D, dtype=dtype)],
                         values=[torch.zeros(B, H, P, D, dtype=dtype)],
                         key_scales=[torch.zeros(B, H, P, dtype=kv_int8.SCALE_DTYPE)] if quantized else [],
                         value_scales=[torch.zeros(B, H, P, dtype=kv_int8.SCALE_DTYPE)] if quantized else [],
                         dtype=torch.float16)
    by_kernel, by_torch = empty(), empty()
    halved = prefilled / 2  # values differ from keys
    for cache, scales, new in ((by_kernel.keys, by_kernel.key_scales, prefilled),
                               (by_kernel.values, by_kernel.value_scales, halved)):
        da.admit_prefill(new, cache[0], scales[0] if quantized else None, slots, lengths)
    by_torch.admit(0, slots, prefilled, halved, lengths)  # CPU tensors: the PyTorch path
    for i, (slot, n) in enumerate(zip(slots.tolist(), lengths.tolist())):
        for part in (0, 1):  # keys, values
            got = by_kernel.read(0, B, P)[part][slot, :, :n].float()
            want = by_torch.read(0, B, P)[part][slot, :, :n].float()
            worst = max(worst, (got - want).abs().max().item())
            exact = (prefilled if part == 0 else halved)[i, :, 40 - n:].float()
            assert quantized or torch.equal(got, exact)
            assert (got - exact).abs().max().item() < 0.05

# the values of a prefill as it hands them on layer by layer: a view into the fused projection's
# output [n, w, 3, H, D] (rows, heads and positions strided), not a contiguous tensor
fused = torch.randn(3, 40, 3, H, D).half()
strided = fused.permute(2, 0, 3, 1, 4)[2]  # [n, H, w, D]
dense = torch.zeros(B, H, P, D, dtype=torch.float16)
da.admit_prefill(strided, dense, None, slots, lengths)
for i, (slot, n) in enumerate(zip(slots.tolist(), lengths.tolist())):
    assert torch.equal(dense[slot, :, :n], strided[i, :, 40 - n:])
print(worst)
"""


def test_the_gpu_decode_kernels_match_the_pytorch_path() -> None:
    """The Triton kernels the H200 runs, under Triton's CPU interpreter: one query per slot
    against exactly its first ``used`` positions (1, a block edge, the whole cache), from a
    half-precision and from an int8 cache (its codes made floats by the conversion or by their
    bits: the same output); the RMSNorm of the rows the projection is of, RoPE and the cache
    write (and int8 quantization) at each slot's own position, as the PyTorch path does them."""
    assert worst_error_under_the_interpreter(KERNEL_CHECK) < 2e-3


def worst_error_under_the_interpreter(script: str) -> float:
    """Run a kernel check in a fresh process under Triton's CPU interpreter (it is read when
    Triton is imported); the check prints its worst error last."""
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {**__import__("os").environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          cwd=ROOT)  # the repository root: the script imports tests.attention_reference
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1])


def compiled_for_hopper(tmp_path: Path, *flags: str) -> dict[str, dict]:
    """``python -m pipeline.bench kernel-code FLAGS``: the kernels Triton's own ptxas compiles for
    sm_90 on any machine (not under the interpreter), by name."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "kernel-code", *flags, "--json",
                           str(tmp_path / "k.json")], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return {code["kernel"]: code for code in json.loads((tmp_path / "k.json").read_text())}


def test_grown_slots_hold_both_shapes_unless_their_cache_would_crowd_the_device() -> None:
    from pipeline.engine.slots import SlotShape
    from pipeline.engine.step_graphs import grown_shape

    long = SlotShape(capacity=426, positions=2176, steps=2048, codebooks=4, vocab=626, keep_hiddens=True)
    wide = SlotShape(capacity=1024, positions=768, steps=640, codebooks=4, vocab=626, keep_hiddens=True)
    union = grown_shape(long, wide, kv_bytes_per_position=32_000, device_bytes=150 * 2**30)
    assert (union.capacity, union.positions, union.steps) == (1024, 2176, 2048)
    assert grown_shape(long, wide, kv_bytes_per_position=32_000, device_bytes=80 * 2**30) == wide
    assert grown_shape(None, wide, kv_bytes_per_position=32_000, device_bytes=None) == wide
    assert grown_shape(long, wide, kv_bytes_per_position=32_000, device_bytes=None).capacity == 1024
    # growing in length only: headroom for the next, longer batch, unless that crowds the device
    longer = dataclasses.replace(wide, positions=1000)
    assert grown_shape(wide, longer, kv_bytes_per_position=32_000, device_bytes=150 * 2**30).positions == 1152
    assert grown_shape(long, dataclasses.replace(long, positions=2300), 32_000, 150 * 2**30).positions == 3264
    assert grown_shape(union, dataclasses.replace(union, positions=2300), 32_000, 150 * 2**30).positions == 2304



def test_a_worker_holding_its_widest_slots_gets_its_long_sentences_in_one_batch() -> None:
    """The H200's calibration (141 kB per row-position, fitted at <= 48 rows) cut a book's 761
    longest sentences into 693 + 68 rows; the 68 ran 760 steps at ~300x real time. With the
    widest slots allocated, the planner uses the cache's own bytes per position."""
    from pipeline.batching import MemoryModel, PlanLimits, plan_batches
    from pipeline.engine.memory import MARGIN, model_with_widest_slots
    from pipeline.types import PlannedSentence

    calibrated = MemoryModel(fixed_bytes=3 * 10**9, bytes_per_row_position=141_000)
    analytic = MemoryModel(fixed_bytes=2 * 10**9, bytes_per_row_position=int(34_258 * MARGIN))  # int8 KV
    longest = [PlannedSentence(id=i, max_new_tokens=2048 - i % 50, prompt_tokens=60 + i % 40)
               for i in range(761)]
    limits = PlanLimits(memory_cap_bytes=int(0.85 * 150e9), max_rows=1024)
    assert len(plan_batches(longest, limits, calibrated)) == 2
    prepared = model_with_widest_slots(calibrated, analytic)
    assert prepared == MemoryModel(fixed_bytes=calibrated.fixed_bytes,
                                   bytes_per_row_position=analytic.bytes_per_row_position)
    assert [len(b.sentence_ids) for b in plan_batches(longest, limits, prepared)] == [761]


LAYER_KERNEL_CHECK = r"""
import torch
import torch.nn.functional as F
import pipeline.engine.layer_kernels as lk
from pipeline.engine.layer_ops import add_rms_norm as _add_rms_norm, silu_mul as _silu_mul

torch.manual_seed(3)
worst = 0.0
for rows, width in ((1, 768), (5, 768), (3, 100)):  # a decode row, a few, a width not a power of 2
    x, delta = torch.randn(rows, 1, width).half(), torch.randn(rows, 1, width).half()
    weight = (torch.rand(width) + 0.5).half()
    got_sum, got_norm = lk.add_rms_norm(x, delta, weight, 1e-6)
    want_sum, want_norm = _add_rms_norm(x.float(), delta.float(), weight.float(), 1e-6)
    assert got_sum.shape == x.shape and got_norm.dtype == torch.float16
    assert torch.equal(got_sum, x + delta)  # the residual stream exactly as PyTorch rounds it
    worst = max(worst, ((got_norm.float() - want_norm).abs() / want_norm.abs().clamp(min=1)).max().item())
for rows, inner, width in ((4, 3072, 768), (2, 1000, 100)):  # three programs a row; a ragged last block
    gate_up = (torch.randn(rows, 1, 2 * inner) * 3).half()
    residual = (torch.randn(rows, 1, width) * torch.tensor([0.2, 5.0, 1.0, 30.0])[:rows, None, None]).half()
    got = lk.silu_mul(gate_up, residual, 1e-5)  # normalised by the residual rows' RMSNorm first
    want = _silu_mul(gate_up.float(), residual.float(), 1e-5)
    assert got.shape == (rows, 1, inner)
    worst = max(worst, ((got.float() - want).abs() / want.abs().clamp(min=1)).max().item())
for books, vocab, width, shape in ((4, 626, 768, (5,)), (2, 10, 100, (3, 2))):  # a decode step's; a prompt's
    table = torch.randn(books * vocab, width).half()
    codes = torch.randint(0, vocab, (*shape, books))
    codes[..., 0, :] = vocab - 1  # each codebook's last row
    got = lk.code_embed(codes, table, vocab)
    want = F.embedding(codes + torch.arange(books) * vocab, table).float().sum(-2).half()
    assert got.shape == want.shape and torch.equal(got, want), (got.float() - want.float()).abs().max()
print(worst)
"""


def test_the_fused_layer_kernels_match_the_pytorch_ops() -> None:
    """The residual add + RMSNorm and SiLU × up kernels the GPU runs between a layer's GEMMs,
    under Triton's CPU interpreter: the residual stream bit for bit as PyTorch adds it, the
    normalised and gated outputs (SiLU × up of a projection of raw residual rows normalised by
    their RMS first, rows of very different RMS) within half-precision rounding of float32
    PyTorch, for widths that are and are not powers of two; a step's codebook embeddings gathered
    and summed as PyTorch sums them, bit for bit."""
    assert worst_error_under_the_interpreter(LAYER_KERNEL_CHECK) < 4e-3


ROPE_HEADS_CHECK = """
import torch
from pipeline.engine import layer_kernels, layer_ops
torch.manual_seed(7)
worst = 0.0
for rows, width, heads, dim, dtype in ((3, 5, 12, 64, torch.float16), (2, 7, 3, 16, torch.float32)):
    qkv = torch.randn(rows, width, 3 * heads * dim).to(dtype)
    residual = (torch.randn(rows, width, heads * dim) * torch.rand(rows, width, 1) * 20).to(dtype)
    angles = torch.rand(rows, 1, width, dim) * 6
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    q, k, v = layer_kernels.rope_heads(qkv, residual, 1e-5, cos, sin, heads)
    normed = qkv.float() * layer_ops.rms_scale(residual, 1e-5)  # each position by its own row's RMS
    parts = normed.view(rows, width, 3, heads, dim).permute(2, 0, 3, 1, 4)
    want = layer_ops.apply_rope(parts[:2], cos.float(), sin.float())
    assert q.shape == k.shape == v.shape == (rows, heads, width, dim) and q.is_contiguous()
    worst = max(worst, (q.float() - want[0]).abs().max().item(), (k.float() - want[1]).abs().max().item(),
                (v.float() - parts[2]).abs().max().item())
print(worst)
"""


def test_a_prefills_rope_and_heads_layout_in_one_kernel_match_the_pytorch_ops() -> None:
    """A prefill's projection of raw residual rows normalised by each position's RMS, RoPE on its
    queries and keys and its values split into heads, in one kernel: within half precision's
    rounding of float32 PyTorch; a head count that is not a power of two (ChatTTS's 12)."""
    assert worst_error_under_the_interpreter(ROPE_HEADS_CHECK) < 8e-3


EMPTY_SLOTS_CHECK = """
import torch
from pipeline.engine import decode_attention as da, kv_int8
torch.manual_seed(3)
B, P, H, D = 5, 96, 2, 64
write_at = torch.tensor([40, 0, 95, 17, 63])
live = torch.tensor([True, False, True, False, True])
used = da.attended_lengths(write_at, live)
assert used.tolist() == [41, 0, 96, 0, 64] and da.attended_lengths(write_at, None).tolist() == [41, 1, 96, 18, 64]
q = torch.randn(B, H, D).half()
k, v = torch.randn(B, H, P, D).half(), torch.randn(B, H, P, D).half()
(kq, ks), (vq, vs) = kv_int8.quantize(k), kv_int8.quantize(v)
every = da.attended_lengths(write_at, None)
for kernel, cache in (("single", (k, v)), ("single", (kq, vq, ks, vs)), ("words", (kq, vq, ks, vs)),
                      ("split", (kq, vq, ks, vs))):
    tensors = cache if len(cache) == 4 else (cache[0], cache[1], None, None)
    skipped = da.decode_attention(q, tensors[0], tensors[1], used, tensors[2], tensors[3], kernel=kernel)
    full = da.decode_attention(q, tensors[0], tensors[1], every, tensors[2], tensors[3], kernel=kernel)
    assert torch.equal(skipped[live], full[live]), kernel  # the live rows: not a bit changed
    assert torch.isfinite(skipped).all() and (skipped[~live] == 0).all(), kernel  # the others: zeros
print(0.0)
"""


def test_slots_whose_rows_ended_attend_to_nothing_and_the_live_rows_are_untouched() -> None:
    """A step's finished or empty slots read none of their cache (their output is never read):
    every attention kernel gives them zeros, never NaN, and the live rows the very same bits."""
    assert worst_error_under_the_interpreter(EMPTY_SLOTS_CHECK) == 0.0

"""The decode step's attention on the GPU, in two Triton kernels: RoPE + cache write, then one query
per slot over that slot's own cache prefix.

A decode step's attention is one query row per (slot, head) against up to a few hundred cached
positions: pure memory traffic. The library kernels pad the query to a 64- or 128-row tile and
spend their time on masked-out products (SDPA's memory-efficient kernel and FlashAttention's
variable-length one both reached only ~1.6 TB/s of the H200's ~4.3 on this shape, ~75 % of a
step; docs/engine.md). This Triton kernel gives each (slot, head) one program that streams the
slot's keys and values once, with an online softmax in float32, and stops at the slot's length.
Before it, ``rope_and_store`` does in one kernel what otherwise takes ~7 small kernels per layer:
rotating q and k on strided views and scattering k and v into the cache.

The cache is [N, H, P, D]: each (slot, head) reads one contiguous run of its positions. With an
int8 cache (``kv_int8.py``) the kernels also take the scales [N, H, P]: ``rope_and_store``
quantizes each new key and value vector, the attention multiplies the scales back in (a key's
scale into its score, a value's into its softmax weight), so no dequantized copy is ever made.

Only on CUDA (Triton ships with CUDA builds of PyTorch); ``gpt.py`` uses masked SDPA elsewhere.
"""

from __future__ import annotations

import math

import torch

import pipeline.engine.split_attention as split_attention  # noqa: PLR0402 (a package import is a circle)
import pipeline.engine.word_attention as word_attention  # noqa: PLR0402
from pipeline.engine.triton_import import in_flight, tl, triton

if triton is not None:  # pragma: no cover - the shared blocks are Triton code
    from pipeline.engine.attention_block import attend_block, int8_codes, int8_step, normed_qkv

# Positions per loop iteration and warps per program of the attention kernel (measured on the
# H200 by `python -m pipeline.bench step-profile --sweep`; docs/engine.md). Set for that sweep by
# EngineTuning (loading.apply_tuning).
BLOCK_POSITIONS = 32
WARPS = 1
# Blocks of positions in flight per program: 1 is the while loop the CPU interpreter runs; 2 or
# more a software-pipelined loop (GPU only), the next blocks' int8 loads issued while one is summed.
# Measured on an H200 (step-profile --sweep, 512 slots x 80..320 positions, one layer): int8
# cache 73.8 / 74.7 / 80.1 us at 1 / 2 / 3 stages (block 32, one warp), the engine bench 3,003 /
# 2,995 / 2,970x: the loads of one warp per (slot, head) gain nothing from being pipelined here.
# 2 all the same: one setting with the word kernel (the default), which gains from it.
STAGES = 2
# How the kernel makes an int8 cache's codes floats: False, the conversion instruction; True, by
# their bits (attention_block.int8_as_float: an integer add, an or, a float subtraction). Tried
# because the sweep's int8 kernel read 2.28 TB/s where the fp16 one read 3.76 (not bound by
# bytes) and the conversion issues at a fraction of the fp32 rate. Measured on an H200: 74.1 vs
# 73.8 us a layer at 512 slots (block 32, one warp). At the bench's 1,024 slots: 98.3 vs 102.7 us
# (contexts up to 256), 183.7 vs 194.2 (up to 512); the engine bench 3,066 / 3,094 vs 2,986 /
# 3,026x, 3.58 vs 3.66 ms a step, in one call. (An earlier bench "without a gain" set it through
# the environment of `python -m pipeline.bench`, which did not read it then: the same code twice.)
INT8_BITS = True
# Tried and taken out: a slot's heads 2 or 4 to a program (more loads in flight where an SM keeps
# at most 32 programs). H200, 1,024 slots, int8 cache, one layer: 108.6 / 200.8 us at its best
# against 102.7 / 194.2 us for one (slot, head) a program (contexts up to 256 / 512).
# Also taken out: a block's sums over positions deferred to the slot's end (kept per position of a
# block, with one running maximum per lane or the slot's), to spare each block's D-wide sum across
# lanes. H200, 1,024 slots, contexts up to 512, int8 cache, block 32, one warp, one stage: 214.1 /
# 219.2 us against 183.7 (best of each over blocks 32-64, warps 1-2, stages 1-2: 192.2 / 191.9
# against 180.3); fp16 239.7 / 239.3 against 239.5: those sums are not what binds it.
# Which attention kernel ``decode_attention`` runs when its caller names none: "single" (one
# program per (slot, head), below), "split" (partitions of the context and a reduce,
# ``split_attention.py``) or "words" (one program per (slot, head) reading an int8 cache as
# 32-bit words, ``word_attention.py``; "single" where the cache is not int8). A process that
# measures them sets this before its steps are captured. "words" by default: on an H200 the engine
# bench ran 3,258-3,292x against 3,104-3,120x with "single" (pool 2048, 1,024 slots), 3,503 against
# 3,150x capped at 24 GiB, the same fidelity and peak (gpu_checks, docs/benchmarks.md).
KERNELS = ("single", "split", "words")
KERNEL = "words"


def available() -> bool:
    return triton is not None


if triton is not None:  # pragma: no cover

    @triton.jit
    def _decode_attention_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                                 stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                                 stride_sb, stride_sh, stride_ob, stride_oh,
                                 QUANTIZED: tl.constexpr, BLOCK_N: tl.constexpr,
                                 HEAD_DIM: tl.constexpr, STAGES: tl.constexpr, INT8_BITS: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        used = tl.load(used_ptr + row)
        dims = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + dims).to(tl.float32) * scale
        base = row * stride_kb + head * stride_kh
        scale_base = row * stride_sb + head * stride_sh
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc = tl.zeros([HEAD_DIM], tl.float32)
        if STAGES > 1:
            # software-pipelined: the next blocks' loads in flight while this one is summed
            # (a ``range`` over a loaded bound: GPU only)
            for start in tl.range(0, used, BLOCK_N, num_stages=STAGES):
                best, total, acc = attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base,
                                                 stride_kp, start, used, dims, best, total, acc,
                                                 QUANTIZED, BLOCK_N, False, INT8_BITS)
        else:
            # a while loop up to the slot's own length: one compiled kernel for every length (a
            # ``range`` over a loaded bound is not supported by Triton's CPU interpreter, which
            # the tests run this kernel under)
            start = 0
            while start < used:
                best, total, acc = attend_block(q, k_ptr, v_ptr, ks_ptr, vs_ptr, base, scale_base,
                                                 stride_kp, start, used, dims, best, total, acc,
                                                 QUANTIZED, BLOCK_N, False, INT8_BITS)
                start += BLOCK_N
        out = acc / tl.maximum(total, 1.0)  # >= 1 with any position (its best weighs 1); 0 with none
        tl.store(o_ptr + row * stride_ob + head * stride_oh + dims, out.to(o_ptr.dtype.element_ty))


if triton is not None:  # pragma: no cover

    @triton.jit
    def _store(cache_ptr, scales_ptr, at, x, QUANTIZED: tl.constexpr):
        """One vector into the cache (and its scale)."""
        if QUANTIZED:
            step = int8_step(tl.max(tl.abs(x), 0))
            tl.store(cache_ptr + at, int8_codes(x / step).to(tl.int8))
            tl.store(scales_ptr, step)
        else:
            tl.store(cache_ptr + at, x.to(cache_ptr.dtype.element_ty))

    @triton.jit
    def _rope_and_store_kernel(qkv_ptr, x_ptr, cos_ptr, sin_ptr, k_cache_ptr, v_cache_ptr,
                               ks_ptr, vs_ptr, at_ptr, q_ptr, eps,
                               stride_qkv_b, stride_x_b, stride_cos_b, stride_cache_b, stride_cache_h,
                               stride_cache_p, stride_scale_b, stride_scale_h,
                               stride_q_b, stride_q_h, QUANTIZED: tl.constexpr,
                               HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_X: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        half: tl.constexpr = HEAD_DIM // 2
        dims = tl.arange(0, HEAD_DIM)
        partner = (dims + half) % HEAD_DIM  # rotate_half: [-x2, x1]
        sign = tl.where(dims < half, -1.0, 1.0)
        cos = tl.load(cos_ptr + row * stride_cos_b + dims)
        sin = tl.load(sin_ptr + row * stride_cos_b + dims)
        q_rot, k_rot, v = normed_qkv(qkv_ptr + row * stride_qkv_b + head * HEAD_DIM, x_ptr + row * stride_x_b,
                                     eps, dims, partner, sign, cos, sin, HEADS, HEAD_DIM, BLOCK_X)
        at = tl.load(at_ptr + row)
        slot = row * stride_cache_b + head * stride_cache_h + at * stride_cache_p + dims
        scale_at = row * stride_scale_b + head * stride_scale_h + at
        _store(k_cache_ptr, ks_ptr + scale_at, slot, k_rot, QUANTIZED)
        _store(v_cache_ptr, vs_ptr + scale_at, slot, v, QUANTIZED)
        tl.store(q_ptr + row * stride_q_b + head * stride_q_h + dims,
                 q_rot.to(q_ptr.dtype.element_ty))


if triton is not None:  # pragma: no cover

    # ``width`` (the prefill's padded prompt length) changes with every group admitted: left to
    # Triton's default, a width that is a multiple of 16 and one that is not are two kernels, the
    # second compiled (~1.3 s of ptxas) wherever it first comes up, possibly mid-stream, with
    # the GPU idle. It only offsets addresses: one kernel serves every width.
    @triton.jit(do_not_specialize=["width"])
    def _admit_kernel(src_ptr, dst_ptr, scales_ptr, slots_ptr, lengths_ptr,
                      stride_sb, stride_sh, stride_sp, stride_db, stride_dh, stride_dp,
                      stride_cb, stride_ch, width,
                      QUANTIZED: tl.constexpr, BLOCK_P: tl.constexpr, HEAD_DIM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        positions = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
        dims = tl.arange(0, HEAD_DIM)
        slot = tl.load(slots_ptr + row)
        length = tl.load(lengths_ptr + row)
        inside = positions < length
        source = positions + (width - length)  # the prompt sits at the right end (left padding)
        x = tl.load(src_ptr + row * stride_sb + head * stride_sh + source[:, None] * stride_sp
                    + dims[None, :], mask=inside[:, None], other=0.0).to(tl.float32)
        at = dst_ptr + slot * stride_db + head * stride_dh + positions[:, None] * stride_dp + dims[None, :]
        if QUANTIZED:
            step = int8_step(tl.max(tl.abs(x), 1))
            tl.store(at, int8_codes(x / step[:, None]).to(tl.int8), mask=inside[:, None])
            tl.store(scales_ptr + slot * stride_cb + head * stride_ch + positions, step, mask=inside)
        else:
            tl.store(at, x.to(dst_ptr.dtype.element_ty), mask=inside[:, None])


def admit_prefill(prefilled: torch.Tensor, cache: torch.Tensor, scales: torch.Tensor | None,
                  slots: torch.Tensor, lengths: torch.Tensor) -> None:
    """A prefill's keys or values [n, H, w, D] (each prompt left-padded: its ``lengths[i]``
    positions at the right end) into positions [0, length) of cache rows ``slots`` [N, H, P, D],
    quantized to int8 with their ``scales`` [N, H, P] when given. One pass: the gather, the
    quantization and the scatter of the PyTorch path in one kernel."""
    rows, heads, width, dim = prefilled.shape
    quantized, scales, _ = _scales(cache, scales, scales)
    block = 32
    _admit_kernel[(rows, heads, triton.cdiv(width, block))](
        prefilled, cache, scales, slots, lengths,
        prefilled.stride(0), prefilled.stride(1), prefilled.stride(2),
        cache.stride(0), cache.stride(1), cache.stride(2), scales.stride(0), scales.stride(1),
        width, QUANTIZED=quantized, BLOCK_P=block, HEAD_DIM=dim, num_warps=2)


def rope_and_store(qkv: torch.Tensor, residual: torch.Tensor, eps: float, cos: torch.Tensor,
                   sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, write_at: torch.Tensor,
                   key_scales: torch.Tensor | None = None,
                   value_scales: torch.Tensor | None = None) -> torch.Tensor:
    """One decode position of B slots in one kernel: q, k and v normalised by the RMSNorm of the
    ``residual`` rows [B, C] they were projected from (the projection holds the norm's weight),
    RoPE on q and k (float32 tables cos/sin [B, D]), k and v written into the caches [N, H, P, D]
    at each slot's ``write_at`` (int8 with their scales [N, H, P] when those are given). ``qkv`` is
    the fused projection's output [B, 3 * H * D]; returns the rotated queries [B, H, D]."""
    rows = qkv.shape[0]
    heads, dim = keys.shape[1], keys.shape[3]
    quantized, key_scales, value_scales = _scales(keys, key_scales, value_scales)
    query = torch.empty(rows, heads, dim, dtype=qkv.dtype, device=qkv.device)
    _rope_and_store_kernel[(rows, heads)](
        qkv, residual, cos, sin, keys, values, key_scales, value_scales, write_at, query, eps,
        qkv.stride(0), residual.stride(0), cos.stride(0), keys.stride(0), keys.stride(1), keys.stride(2),
        key_scales.stride(0), key_scales.stride(1), query.stride(0), query.stride(1),
        QUANTIZED=quantized, HEADS=heads, HEAD_DIM=dim, BLOCK_X=triton.next_power_of_2(heads * dim),
        num_warps=1)
    return query


def attended_lengths(write_at: torch.Tensor, live: torch.Tensor | None) -> torch.Tensor:
    """The positions each slot's attention reads this step (int32 [B]): [0, write_at] for a slot
    whose row is still generating, none for one whose row has ended or that holds none. Such
    slots still run through a step at its bucket's shape, but what they compute is never read
    (a finished row's next hidden state lands past what it kept); reading their caches was 26 %
    on top of the live rows' reads in the bench (1,024 rows declining through power-of-two
    buckets), 7 % with a pool refilling the slots (``python -m pipeline.bench step-model``)."""
    lengths = (write_at + 1).to(torch.int32)
    return lengths if live is None else lengths * live


def decode_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                     used: torch.Tensor, key_scales: torch.Tensor | None = None,
                     value_scales: torch.Tensor | None = None, kernel: str | None = None,
                     partition: int | None = None) -> torch.Tensor:
    """query [B, H, D]; keys/values [B, H, P, D] (the slots' caches, D contiguous; int8 when
    their scales [B, H, P] are given); used [B] int32: positions [0, used) of each slot are
    attended to (none: its output is zeros). ``kernel``: one of ``KERNELS`` (default ``KERNEL``);
    ``partition``: positions per program of the split kernel. Returns [B, H, D] in the query's dtype."""
    rows, heads, dim = query.shape
    quantized, key_scales, value_scales = _scales(keys, key_scales, value_scales)
    chosen = kernel or KERNEL
    if chosen not in KERNELS:
        raise ValueError(f"decode attention kernel {chosen!r}: choose one of {KERNELS}")
    if chosen == "split":
        return split_attention.split_decode_attention(query, keys, values, used, key_scales,
                                                      value_scales, quantized, partition)
    if chosen == "words" and quantized:
        return word_attention.word_decode_attention(query, keys, values, used, key_scales, value_scales)
    out = torch.empty_like(query)
    _decode_attention_kernel[(rows, heads)](
        query, keys, values, key_scales, value_scales, out, used, 1.0 / math.sqrt(dim),
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        QUANTIZED=quantized, BLOCK_N=BLOCK_POSITIONS, HEAD_DIM=dim, STAGES=in_flight(STAGES), INT8_BITS=INT8_BITS,
        num_warps=WARPS)
    return out


def _scales(keys: torch.Tensor, key_scales: torch.Tensor | None,
            value_scales: torch.Tensor | None) -> tuple[bool, torch.Tensor, torch.Tensor]:
    """(quantized, key scales, value scales); without scales the kernels get the caches as
    placeholders (never read) and strides of a [N, H, P] view of them."""
    if key_scales is None or value_scales is None:
        placeholder = keys[:, :, :, 0]
        return False, placeholder, placeholder
    if key_scales.stride(2) != 1 or value_scales.stride() != key_scales.stride():
        raise ValueError("scales must be [N, H, P] with positions contiguous and equal strides")
    return True, key_scales, value_scales

"""Decode attention over the int8 cache read as 32-bit words: four codes per register, the keys'
dot products by the GPU's four-way byte dot product (``dp4a``), the values made floats by one
byte permute each. The kernel ``decode_attention(kernel="words")`` runs.

Why: the one-program-per-(slot, head) kernel (``decode_attention.py``) spends ~28 instructions
per cached position making int8 codes floats (extract, add, or, subtract) before each multiply,
and 2 shuffles per position summing its values across lanes: compiled for the H200 (sm_90) its
loop issues 897 instructions per block of 32 positions, and the H200 read that cache at 2.28 TB/s
where the same kernel over fp16 (16.7 instructions per position, no conversions) read 3.76. This
one issues 334 (``python -m pipeline.bench kernel-code``; ``tests/test_word_attention.py``):

- keys: the query quantized once per program to 15 bits (``q = step * (128 * coarse + fine)``,
  both int8, packed four to a word), so a key word's dot product with it is two ``dp4a``: exact
  integer sums where the other kernel rounds a float product per code. The query's own rounding
  (1 / 32,512 of its largest element) is below fp16's.
- values: each code, biased to 0..255, placed by one ``prmt`` in the mantissa of 1.0 (the float
  1 + b / 2**15); a block's weighted sum of those is the weighted sum of the codes plus the weights'
  sum times 1 + 2**-8, which is taken away per block before it joins the running sum (so the sum
  rounds relative to the values, not to the offset).
- each lane keeps its own partial sums of the values over the positions it loads (a [8, D / 4]
  accumulator per byte of a word); the lanes are summed once, at the slot's end, not per block.

Under Triton's CPU interpreter (the tests) the same integer and bit arithmetic runs as plain
Triton operations instead of the inline PTX (``ASM``); ``tests/gpu`` checks the PTX on the card.
Positions past a slot's length are read from the slot's own (allocated) capacity and masked out
of the scores, so the word loads need no mask.
"""

from __future__ import annotations

import math

import torch

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover - the shared blocks are Triton code
    from pipeline.engine.attention_block import int8_codes, int8_step, rotated

ROPE_INSIDE = True  # EngineTuning.attention_rope: a step's RoPE and cache write in this kernel
# (``rope_word_attention``) rather than a kernel of their own before it: one launch a layer fewer,
# steps 2.61-2.62 against 2.69-2.71 ms on an H100 (1,024 slots, the same tokens)
BLOCK_POSITIONS = 32  # positions per loop iteration: 8 lanes x 4 positions each, 4 lanes per position
WARPS = 1
# Tried on an H200 and taken out (gpu_checks' attention section, 1,024 slots x 128-512 positions):
# the next block's words loaded before this one is summed (127 registers at block 32, 64 at block
# 16): no faster, 0.5-0.8x at 256-512 slots; at most 64 registers a thread (32 programs to an SM,
# not 25; 7 spills a block): 4 % slower; block 64: as fast as 32; two warps: 3x slower.


if triton is not None:  # pragma: no cover
    BIAS = tl.constexpr(1.0 + 128.0 / 32768.0)  # the float a value code of 0 becomes: 1 + (0 + 128) / 2**15
    SIGN_BITS = tl.constexpr(-2139062144)  # 0x80808080: each byte's top bit, flipped to add 128 to its code
    LOG2E = tl.constexpr(1.4426950408889634)

    @triton.jit
    def _dp4a(words, query_words, ASM: tl.constexpr):
        """The sum of the four signed byte products of each pair of words."""
        if ASM:
            return tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, 0;", "=r,r,r", [words, query_words],
                                             dtype=tl.int32, is_pure=True, pack=1)
        else:
            total = words * 0
            for byte in tl.static_range(4):
                total += ((words << (24 - 8 * byte)) >> 24) * ((query_words << (24 - 8 * byte)) >> 24)
            return total

    @triton.jit
    def _byte_floats(biased, ASM: tl.constexpr):
        """Each byte b of each word as the float 1 + b / 2**15 (b in the mantissa's second byte)."""
        if ASM:
            return tl.inline_asm_elementwise(
                "{.reg .b32 one; mov.b32 one, 0x3F800000; prmt.b32 $0, $4, one, 0x7604; "
                "prmt.b32 $1, $4, one, 0x7614; prmt.b32 $2, $4, one, 0x7624; prmt.b32 $3, $4, one, 0x7634;}",
                "=r,=r,=r,=r,r", [biased], dtype=(tl.float32, tl.float32, tl.float32, tl.float32),
                is_pure=True, pack=1)
        else:
            one = 0x3F800000
            return (((biased << 8) & 0xFF00 | one).to(tl.float32, bitcast=True),
                    (biased & 0xFF00 | one).to(tl.float32, bitcast=True),
                    ((biased >> 8) & 0xFF00 | one).to(tl.float32, bitcast=True),
                    ((biased >> 16) & 0xFF00 | one).to(tl.float32, bitcast=True))

    @triton.jit
    def _rounded(x):
        """Rounded half away from zero, as int32."""
        return (x + tl.where(x >= 0, 0.5, -0.5)).to(tl.int32)

    @triton.jit
    def _query_words(q, lanes):
        """The query [D / 4, 4] (float32) as two packed int8 halves (coarse, fine) of 15-bit
        codes, and its step."""
        step = tl.maximum(tl.max(tl.max(tl.abs(q), 1), 0), 1e-30) / 16256.0
        codes = _rounded(q / step)  # -16256..16256
        coarse = _rounded(codes.to(tl.float32) / 128.0)  # -127..127
        fine = codes - coarse * 128  # -64..64
        shifts = lanes[None, :] * 8
        return tl.sum((coarse & 0xFF) << shifts, 1), tl.sum((fine & 0xFF) << shifts, 1), step

    @triton.jit
    def _block_words(k_ptr, v_ptr, base, stride_kp, start, used, words, BLOCK_N: tl.constexpr):
        """A block's key and value words [BLOCK_N, D / 4], the values' codes biased by 128.
        Positions past ``used`` read its last one (in bounds: no mask; their scores are masked)."""
        held = tl.minimum(start + tl.arange(0, BLOCK_N), used - 1)
        offsets = base + held[:, None] * stride_kp + words[None, :]
        return tl.load(k_ptr + offsets), tl.load(v_ptr + offsets) ^ SIGN_BITS

    @triton.jit
    def _lane_sums(weights, values, BLOCK_N: tl.constexpr, WORDS: tl.constexpr):
        """sum over a block's positions of weight x value, kept per lane: [BLOCK_N / 8, 8, W]
        summed over its first axis adds only the positions each lane holds."""
        return tl.sum(tl.reshape(weights[:, None] * values, [BLOCK_N // 8, 8, WORDS]), 0)

    @triton.jit
    def _word_attention_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                               stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                               stride_sb, stride_sh, stride_ob, stride_oh,
                               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        words = tl.arange(0, HEAD_DIM // 4)
        lanes = tl.arange(0, 4)
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + words[:, None] * 4 + lanes[None, :])
        _attend(q.to(tl.float32), k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr + row * stride_ob + head * stride_oh,
                tl.load(used_ptr + row), scale, row * stride_kb + head * stride_kh, stride_kp,
                row * stride_sb + head * stride_sh, BLOCK_N, HEAD_DIM, ASM)

    @triton.jit
    def _attend(q, k_ptr, v_ptr, ks_ptr, vs_ptr, out_ptr, used, scale, base, stride_kp, scale_base,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr):
        """One (slot, head): the query q [D / 4, 4] over positions [0, used) of the cache from
        ``base`` (in words; its scales from ``scale_base``), the output at ``out_ptr``."""
        WORDS: tl.constexpr = HEAD_DIM // 4
        words = tl.arange(0, WORDS)
        lanes = tl.arange(0, 4)
        coarse, fine, q_step = _query_words(q, lanes)
        q_scale = q_step * scale * LOG2E  # scores in base 2: exp2 is the hardware's own
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc0 = tl.zeros([8, WORDS], tl.float32)  # byte 0 of each word (dims 0, 4, 8, ...), per lane
        acc1 = tl.zeros([8, WORDS], tl.float32)
        acc2 = tl.zeros([8, WORDS], tl.float32)
        acc3 = tl.zeros([8, WORDS], tl.float32)
        start = 0
        while start < used:  # a while loop: Triton's CPU interpreter takes no range over a load
            positions = start + tl.arange(0, BLOCK_N)
            inside = positions < used
            keys, values = _block_words(k_ptr, v_ptr, base, stride_kp, start, used, words, BLOCK_N)
            dots = _dp4a(keys, coarse[None, :], ASM) * 128 + _dp4a(keys, fine[None, :], ASM)
            scores = tl.sum(dots, 1).to(tl.float32) * q_scale
            scores *= tl.load(ks_ptr + scale_base + positions, mask=inside, other=0.0)
            scores = tl.where(inside, scores, float("-inf"))
            new_best = tl.maximum(best, tl.max(scores, 0))
            rescale = tl.exp2(best - new_best)
            weights = tl.exp2(scores - new_best)
            total = total * rescale + tl.sum(weights, 0)
            weights *= tl.load(vs_ptr + scale_base + positions, mask=inside, other=0.0)
            offset = tl.sum(tl.reshape(weights, [BLOCK_N // 8, 8]), 0)[:, None] * BIAS
            v0, v1, v2, v3 = _byte_floats(values, ASM)
            acc0 = acc0 * rescale + (_lane_sums(weights, v0, BLOCK_N, WORDS) - offset)
            acc1 = acc1 * rescale + (_lane_sums(weights, v1, BLOCK_N, WORDS) - offset)
            acc2 = acc2 * rescale + (_lane_sums(weights, v2, BLOCK_N, WORDS) - offset)
            acc3 = acc3 * rescale + (_lane_sums(weights, v3, BLOCK_N, WORDS) - offset)
            best = new_best
            start += BLOCK_N
        out = out_ptr + words * 4
        # the codes were placed 2**15 below the float's units; total >= 1 with any position, 0 with none
        norm = 32768.0 / tl.maximum(total, 1.0)
        kind = out_ptr.dtype.element_ty
        tl.store(out, (tl.sum(acc0, 0) * norm).to(kind))
        tl.store(out + 1, (tl.sum(acc1, 0) * norm).to(kind))
        tl.store(out + 2, (tl.sum(acc2, 0) * norm).to(kind))
        tl.store(out + 3, (tl.sum(acc3, 0) * norm).to(kind))

    @triton.jit
    def _store_words(cache_ptr, scale_ptr, x, lanes):
        """x [D / 4, 4] into the int8 cache as words of four codes, its scale beside: the codes and
        scale ``decode_attention.rope_and_store`` writes."""
        step = int8_step(tl.max(tl.max(tl.abs(x), 1), 0))
        codes = int8_codes(x / step)
        tl.store(cache_ptr, tl.sum((codes & 0xFF) << (lanes[None, :] * 8), 1))
        tl.store(scale_ptr, step)

    @triton.jit
    def _rope_word_attention_kernel(qkv_ptr, cos_ptr, sin_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr,
                                    at_ptr, used_ptr, scale, stride_qkv_b, stride_cos_b,
                                    stride_kb, stride_kh, stride_kp, stride_sb, stride_sh,
                                    stride_ob, stride_oh, HEADS: tl.constexpr,
                                    BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr):
        row = tl.program_id(0)
        head = tl.program_id(1)
        words = tl.arange(0, HEAD_DIM // 4)
        lanes = tl.arange(0, 4)
        dims = words[:, None] * 4 + lanes[None, :]
        partner = (dims + HEAD_DIM // 2) % HEAD_DIM  # rotate_half: [-x2, x1]
        sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
        cos = tl.load(cos_ptr + row * stride_cos_b + dims)
        sin = tl.load(sin_ptr + row * stride_cos_b + dims)
        source = qkv_ptr + row * stride_qkv_b + head * HEAD_DIM
        q = rotated(source, dims, partner, sign, cos, sin)
        k = rotated(source + HEADS * HEAD_DIM, dims, partner, sign, cos, sin)
        v = tl.load(source + 2 * HEADS * HEAD_DIM + dims).to(tl.float32)
        at = tl.load(at_ptr + row)
        base = row * stride_kb + head * stride_kh
        scale_base = row * stride_sb + head * stride_sh
        _store_words(k_ptr + base + at * stride_kp + words, ks_ptr + scale_base + at, k, lanes)
        _store_words(v_ptr + base + at * stride_kp + words, vs_ptr + scale_base + at, v, lanes)
        tl.debug_barrier()  # this position's words, written by some lanes, are read by others
        q = q.to(qkv_ptr.dtype.element_ty).to(tl.float32)  # the query the two kernels hand on
        _attend(q, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr + row * stride_ob + head * stride_oh,
                tl.load(used_ptr + row), scale, base, stride_kp, scale_base, BLOCK_N, HEAD_DIM, ASM)


def word_decode_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                          used: torch.Tensor, key_scales: torch.Tensor,
                          value_scales: torch.Tensor) -> torch.Tensor:
    """``decode_attention.decode_attention`` over an int8 cache [B, H, P, D] (D a multiple of 4,
    contiguous) with its scales [B, H, P]: the same result to within the query's 15-bit rounding."""
    rows, heads, dim = query.shape
    key_words, value_words = keys.view(torch.int32), values.view(torch.int32)
    out = torch.empty_like(query)
    _word_attention_kernel[(rows, heads)](
        query, key_words, value_words, key_scales, value_scales, out, used, 1.0 / math.sqrt(dim),
        query.stride(0), query.stride(1), key_words.stride(0), key_words.stride(1), key_words.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        BLOCK_N=BLOCK_POSITIONS, HEAD_DIM=dim, ASM=compiled(), num_warps=WARPS)
    return out


def rope_word_attention(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                        keys: torch.Tensor, values: torch.Tensor, write_at: torch.Tensor,
                        used: torch.Tensor, key_scales: torch.Tensor,
                        value_scales: torch.Tensor) -> torch.Tensor:
    """``decode_attention.rope_and_store`` and then this kernel, as one kernel (``ROPE_INSIDE``):
    RoPE on q and k, k and v into the int8 cache at ``write_at``, the attention over [0, used).
    The same codes, scales and output; one launch a layer fewer, and the rotated queries never
    leave the registers. ``qkv`` [B, 3 * H * D] (the fused projection's output); returns [B, H, D]."""
    rows = qkv.shape[0]
    heads, dim = keys.shape[1], keys.shape[3]
    key_words, value_words = keys.view(torch.int32), values.view(torch.int32)
    out = torch.empty(rows, heads, dim, dtype=qkv.dtype, device=qkv.device)
    _rope_word_attention_kernel[(rows, heads)](
        qkv, cos, sin, key_words, value_words, key_scales, value_scales, out, write_at, used,
        1.0 / math.sqrt(dim), qkv.stride(0), cos.stride(0),
        key_words.stride(0), key_words.stride(1), key_words.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        HEADS=heads, BLOCK_N=BLOCK_POSITIONS, HEAD_DIM=dim, ASM=compiled(), num_warps=WARPS)
    return out


def compiled() -> bool:
    """Whether the kernel is compiled for the GPU (its inline PTX) rather than run by Triton's CPU
    interpreter (TRITON_INTERPRET=1 makes ``triton.jit`` give an interpreted function)."""
    return isinstance(_word_attention_kernel, triton.runtime.JITFunction)

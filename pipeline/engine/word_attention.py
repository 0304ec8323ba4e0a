"""Decode attention over the int8 cache read as 32-bit words: four codes per register, the keys'
dot products by the GPU's four-way byte dot product (``dp4a``), the values' weighted sums by its
two-way one (``dp2a``: 16-bit weights times byte codes). The kernel ``decode_attention(kernel="words")``
runs.

Why: the one-program-per-(slot, head) kernel (``decode_attention.py``) spends ~28 instructions
per cached position making int8 codes floats (extract, add, or, subtract) before each multiply,
and 2 shuffles per position summing its values across lanes: compiled for the H200 (sm_90) its
loop issues 897 instructions per block of 32 positions, and the H200 read that cache at 2.28 TB/s
where the same kernel over fp16 (16.7 instructions per position, no conversions) read 3.76. This
one issues 280 (307 with its loads pipelined, ~20 of them only where a block raises the slot's
maximum; ``python -m pipeline.bench kernel-code``; ``tests/test_word_attention.py``): the keys'
and values' integer arithmetic as ``word_codes.py`` makes it, a lane's key words summed by
chained ``dp4a``, two positions' value codes at a time by ``dp2a``, and each lane keeps its own
partial sums of the values over the positions it loads (a [8, D / 4] accumulator per byte of a
word), the lanes summed once, at the slot's end, not per block. Positions past a slot's length
are read from the slot's own (allocated) capacity and masked out of the scores (their weights
0), so the word loads need no mask.
"""

from __future__ import annotations

import math

import torch

from pipeline.engine.triton_import import compiled, in_flight, tl, triton

if triton is not None:  # pragma: no cover - the shared blocks are Triton code
    from pipeline.engine.attention_block import normed_qkv
    from pipeline.engine.word_codes import key_dots, query_words, store_words, value_sums

ROPE_INSIDE = True  # EngineTuning.attention_rope: a step's RoPE and cache write in this kernel
# (``rope_word_attention``) rather than a kernel of their own before it: one launch a layer fewer,
# steps 2.61-2.62 against 2.69-2.71 ms on an H100 (1,024 slots, the same tokens)
BLOCK_POSITIONS = 32  # positions per loop iteration: 8 lanes x 4 positions each, 4 lanes per position
WARPS = 1
# Blocks of positions in flight per program: 1, the while loop (the CPU interpreter's); 2 or more, a
# software-pipelined ``tl.range`` (GPU only) whose next blocks' words are copied into shared memory
# while one is summed, so that more of the cache is in flight than the registers hold. 2: steps
# 2.42 against 2.45 ms on an H100, 4,539-4,551 against 4,487-4,498x (3 stages: the same as 2).
STAGES = 2
# Each step's programs started longest slot first, every head of a slot together (``longest_first``,
# one sort of the slots' lengths a step), rather than slot by slot per head: no long slot left to
# start as the kernel ends.
LONGEST_FIRST = False
# Half-precision scales read two to a 32-bit word where the capacity is even (``_block_scales``);
# None: with pipelined loads (STAGES > 1), whose copies into shared memory take nothing narrower.
SCALE_WORDS: bool | None = None
# Tried on an H200 and taken out (gpu_checks' attention section, 1,024 slots x 128-512 positions):
# the next block's words loaded before this one is summed (127 registers at block 32, 64 at block
# 16): no faster, 0.5-0.8x at 256-512 slots; at most 64 registers a thread (32 programs to an SM,
# not 25; 7 spills a block): 4 % slower; block 64: as fast as 32; two warps: 3x slower.


if triton is not None:  # pragma: no cover
    LOG2E = tl.constexpr(1.4426950408889634)

    @triton.jit
    def _block_words(k_ptr, v_ptr, base, stride_kp, start, used, words, BLOCK_N: tl.constexpr):
        """A block's key and value words [BLOCK_N, D / 4].
        Positions past ``used`` read its last one (in bounds: no mask; their scores are masked)."""
        held = tl.minimum(start + tl.arange(0, BLOCK_N), used - 1)
        offsets = base + held[:, None] * stride_kp + words[None, :]
        return tl.load(k_ptr + offsets), tl.load(v_ptr + offsets)

    @triton.jit
    def _program_slot(order_ptr, ORDERED: tl.constexpr):
        """This program's (slot, head): by the grid (slots, heads), or, ORDERED, by the grid
        (heads, slots) with the slots taken in ``order`` (every head of the longest slot first)."""
        if ORDERED:
            row = tl.load(order_ptr + tl.program_id(1))
            head = tl.program_id(0)
        else:
            row = tl.program_id(0)
            head = tl.program_id(1)
        return row, head

    @triton.jit
    def _block_scales(s_ptr, scale_base, start, used, BLOCK_N: tl.constexpr, PAIRED: tl.constexpr,
                      MASKED: tl.constexpr):
        """A block's scales; MASKED (or not PAIRED): 0 past ``used``. PAIRED: each position's
        read as the 32-bit word of two that holds it (the slots' capacity even), which a pipelined
        loop copies into shared memory with the codes (it copies nothing narrower than 32 bits), so
        no load of its own holds up each block; each word read for both its positions, so that
        each lands where its score is (no interleave of two halves)."""
        positions = start + tl.arange(0, BLOCK_N)
        if PAIRED:
            held = tl.minimum(positions, used - 1)
            words = tl.load(s_ptr.to(tl.pointer_type(tl.int32)) + scale_base // 2 + held // 2)
            scales = (words >> ((held & 1) * 16)).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
            if MASKED:
                scales = tl.where(positions < used, scales, 0.0)
        else:  # one at a time: 0 past ``used`` either way
            scales = tl.load(s_ptr + scale_base + positions, mask=positions < used, other=0.0)
        return scales

    @triton.jit
    def _attend_block(k_ptr, v_ptr, ks_ptr, vs_ptr, base, stride_kp, scale_base, start, used, coarse, fine,
                      q_scale, best, total, acc0, acc1, acc2, acc3,
                      BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr, PAIRED: tl.constexpr):
        """The positions [start, start + BLOCK_N) of a slot into its running maximum, sum of
        weights and per-lane value sums (one per byte of a word)."""
        WORDS: tl.constexpr = HEAD_DIM // 4
        words = tl.arange(0, WORDS)
        positions = start + tl.arange(0, BLOCK_N)
        inside = positions < used
        keys, values = _block_words(k_ptr, v_ptr, base, stride_kp, start, used, words, BLOCK_N)
        dots = key_dots(keys, coarse, fine, BLOCK_N, WORDS, ASM)
        # scores in the keys' units (the query's step left out: q_scale > 0 keeps their order), so
        # that the step and the maximum join the exponent as one fused multiply-add a position; a
        # key scale past ``used`` (NaN, say) is masked with its score
        scores = dots.to(tl.float32) * _block_scales(ks_ptr, scale_base, start, used, BLOCK_N, PAIRED, False)
        scores = tl.where(inside, scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, 0))
        if new_best > best:  # the sums so far rescaled only where the maximum grew (few blocks of a slot)
            rescale = tl.exp2((best - new_best) * q_scale)
            total *= rescale
            acc0 *= rescale
            acc1 *= rescale
            acc2 *= rescale
            acc3 *= rescale
        weights = tl.exp2(scores * q_scale - new_best * q_scale)
        total += tl.sum(weights, 0)
        weights *= _block_scales(vs_ptr, scale_base, start, used, BLOCK_N, PAIRED, True)
        acc0, acc1, acc2, acc3 = value_sums(acc0, acc1, acc2, acc3, weights, values, BLOCK_N, WORDS, ASM)
        return new_best, total, acc0, acc1, acc2, acc3

    @triton.jit
    def _word_attention_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, order_ptr, scale,
                               stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                               stride_sb, stride_sh, stride_ob, stride_oh,
                               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr,
                               STAGES: tl.constexpr, ORDERED: tl.constexpr, PAIRED: tl.constexpr):
        row, head = _program_slot(order_ptr, ORDERED)
        attend_slot_head(row, head, q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                         stride_qb, stride_qh, stride_kb, stride_kh, stride_kp, stride_sb, stride_sh,
                         stride_ob, stride_oh, BLOCK_N, HEAD_DIM, ASM, STAGES, PAIRED)

    @triton.jit
    def attend_slot_head(row, head, q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, scale,
                         stride_qb, stride_qh, stride_kb, stride_kh, stride_kp, stride_sb, stride_sh,
                         stride_ob, stride_oh, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                         ASM: tl.constexpr, STAGES: tl.constexpr, PAIRED: tl.constexpr):
        """Slot ``row``'s head ``head``: its query from ``q_ptr``, its output to ``o_ptr``."""
        words = tl.arange(0, HEAD_DIM // 4)
        lanes = tl.arange(0, 4)
        q = tl.load(q_ptr + row * stride_qb + head * stride_qh + words[:, None] * 4 + lanes[None, :])
        _attend(q.to(tl.float32), k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr + row * stride_ob + head * stride_oh,
                tl.load(used_ptr + row), scale, row * stride_kb + head * stride_kh, stride_kp,
                row * stride_sb + head * stride_sh, BLOCK_N, HEAD_DIM, ASM, STAGES, PAIRED)

    @triton.jit
    def _attend(q, k_ptr, v_ptr, ks_ptr, vs_ptr, out_ptr, used, scale, base, stride_kp, scale_base,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr, STAGES: tl.constexpr,
                PAIRED: tl.constexpr):
        """One (slot, head): the query q [D / 4, 4] over positions [0, used) of the cache from
        ``base`` (in words; its scales from ``scale_base``), the output at ``out_ptr``."""
        WORDS: tl.constexpr = HEAD_DIM // 4
        words = tl.arange(0, WORDS)
        lanes = tl.arange(0, 4)
        coarse, fine, q_step = query_words(q, lanes)
        q_scale = q_step * scale * LOG2E  # scores in base 2: exp2 is the hardware's own
        best = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc0 = tl.zeros([8, WORDS], tl.float32)  # byte 0 of each word (dims 0, 4, 8, ...), per lane
        acc1 = tl.zeros([8, WORDS], tl.float32)
        acc2 = tl.zeros([8, WORDS], tl.float32)
        acc3 = tl.zeros([8, WORDS], tl.float32)
        if STAGES > 1:  # software-pipelined: the next blocks' words copied in while one is summed
            for start in tl.range(0, used, BLOCK_N, num_stages=STAGES):  # GPU only: a loaded bound
                best, total, acc0, acc1, acc2, acc3 = _attend_block(
                    k_ptr, v_ptr, ks_ptr, vs_ptr, base, stride_kp, scale_base, start, used, coarse, fine,
                    q_scale, best, total, acc0, acc1, acc2, acc3, BLOCK_N, HEAD_DIM, ASM, PAIRED)
        else:
            start = 0
            while start < used:  # a while loop: Triton's CPU interpreter takes no range over a load
                best, total, acc0, acc1, acc2, acc3 = _attend_block(
                    k_ptr, v_ptr, ks_ptr, vs_ptr, base, stride_kp, scale_base, start, used, coarse, fine,
                    q_scale, best, total, acc0, acc1, acc2, acc3, BLOCK_N, HEAD_DIM, ASM, PAIRED)
                start += BLOCK_N
        out = out_ptr + words * 4
        norm = 1.0 / tl.maximum(total, 1.0)  # total >= 1 with any position, 0 with none
        kind = out_ptr.dtype.element_ty
        tl.store(out, (tl.sum(acc0, 0) * norm).to(kind))
        tl.store(out + 1, (tl.sum(acc1, 0) * norm).to(kind))
        tl.store(out + 2, (tl.sum(acc2, 0) * norm).to(kind))
        tl.store(out + 3, (tl.sum(acc3, 0) * norm).to(kind))

    @triton.jit
    def _rope_word_attention_kernel(qkv_ptr, x_ptr, cos_ptr, sin_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr,
                                    at_ptr, used_ptr, order_ptr, scale, eps, stride_qkv_b, stride_x_b,
                                    stride_cos_b, stride_kb, stride_kh, stride_kp, stride_sb, stride_sh,
                                    stride_ob, stride_oh, HEADS: tl.constexpr, BLOCK_X: tl.constexpr,
                                    BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr,
                                    STAGES: tl.constexpr, ORDERED: tl.constexpr, PAIRED: tl.constexpr):
        row, head = _program_slot(order_ptr, ORDERED)
        words = tl.arange(0, HEAD_DIM // 4)
        lanes = tl.arange(0, 4)
        dims = words[:, None] * 4 + lanes[None, :]
        partner = (dims + HEAD_DIM // 2) % HEAD_DIM  # rotate_half: [-x2, x1]
        sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
        cos = tl.load(cos_ptr + row * stride_cos_b + dims)
        sin = tl.load(sin_ptr + row * stride_cos_b + dims)
        q, k, v = normed_qkv(qkv_ptr + row * stride_qkv_b + head * HEAD_DIM, x_ptr + row * stride_x_b, eps,
                             dims, partner, sign, cos, sin, HEADS, HEAD_DIM, BLOCK_X)
        at = tl.load(at_ptr + row)
        base = row * stride_kb + head * stride_kh
        scale_base = row * stride_sb + head * stride_sh
        store_words(k_ptr + base + at * stride_kp + words, ks_ptr + scale_base + at, k, lanes)
        store_words(v_ptr + base + at * stride_kp + words, vs_ptr + scale_base + at, v, lanes)
        tl.debug_barrier()  # this position's words, written by some lanes, are read by others
        q = q.to(qkv_ptr.dtype.element_ty).to(tl.float32)  # the query the two kernels hand on
        _attend(q, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr + row * stride_ob + head * stride_oh,
                tl.load(used_ptr + row), scale, base, stride_kp, scale_base, BLOCK_N, HEAD_DIM, ASM, STAGES, PAIRED)


def word_decode_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                          used: torch.Tensor, key_scales: torch.Tensor,
                          value_scales: torch.Tensor, order: torch.Tensor | None = None) -> torch.Tensor:
    """``decode_attention.decode_attention`` over an int8 cache [B, H, P, D] (D a multiple of 4,
    contiguous) with its scales [B, H, P]: the same result to within the query's 15-bit rounding.
    ``order`` (int32 [B], a permutation of the slots): the order their programs start in."""
    rows, heads, dim = query.shape
    key_words, value_words = keys.view(torch.int32), values.view(torch.int32)
    out = torch.empty_like(query)
    _word_attention_kernel[_grid(rows, heads, order)](
        query, key_words, value_words, key_scales, value_scales, out, used, _or_any(order, used),
        1.0 / math.sqrt(dim), query.stride(0), query.stride(1),
        key_words.stride(0), key_words.stride(1), key_words.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        BLOCK_N=BLOCK_POSITIONS, HEAD_DIM=dim, ASM=compiled(), STAGES=in_flight(STAGES), ORDERED=order is not None,
        PAIRED=_paired(key_scales), num_warps=WARPS)
    return out


def rope_word_attention(qkv: torch.Tensor, residual: torch.Tensor, eps: float, cos: torch.Tensor,
                        sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, write_at: torch.Tensor,
                        used: torch.Tensor, key_scales: torch.Tensor,
                        value_scales: torch.Tensor, order: torch.Tensor | None = None) -> torch.Tensor:
    """``decode_attention.rope_and_store`` and then this kernel, as one kernel (``ROPE_INSIDE``):
    q, k and v normalised by the RMSNorm of the ``residual`` rows [B, C] they were projected from
    (the projection holds the norm's weight), RoPE on q and k, k and v into the int8 cache at
    ``write_at``, the attention over [0, used). The same codes, scales and output; one launch a
    layer fewer, and the rotated queries never leave the registers. ``qkv`` [B, 3 * H * D] (the
    fused projection's output); returns [B, H, D]."""
    rows = qkv.shape[0]
    heads, dim = keys.shape[1], keys.shape[3]
    key_words, value_words = keys.view(torch.int32), values.view(torch.int32)
    out = torch.empty(rows, heads, dim, dtype=qkv.dtype, device=qkv.device)
    _rope_word_attention_kernel[_grid(rows, heads, order)](
        qkv, residual, cos, sin, key_words, value_words, key_scales, value_scales, out, write_at, used,
        _or_any(order, used), 1.0 / math.sqrt(dim), eps, qkv.stride(0), residual.stride(0), cos.stride(0),
        key_words.stride(0), key_words.stride(1), key_words.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        HEADS=heads, BLOCK_X=triton.next_power_of_2(heads * dim), BLOCK_N=BLOCK_POSITIONS, HEAD_DIM=dim,
        ASM=compiled(), STAGES=in_flight(STAGES), ORDERED=order is not None, PAIRED=_paired(key_scales),
        num_warps=WARPS)
    return out


def longest_first(used: torch.Tensor) -> torch.Tensor:
    """The slots by the positions they attend this step, longest first (int32 [B]): the order
    ``LONGEST_FIRST`` starts their programs in, so that no long slot starts last."""
    return torch.argsort(used, descending=True).to(torch.int32)


def reads_scale_words(stages: int) -> bool:
    """Whether the kernel at ``stages`` blocks in flight reads half-precision scales two to a
    word where the capacity is even (``SCALE_WORDS``)."""
    return stages > 1 if SCALE_WORDS is None else SCALE_WORDS


def _paired(scales: torch.Tensor) -> bool:
    """Whether the kernel reads these scales two to a word."""
    return (reads_scale_words(STAGES) and scales.element_size() == 2 and scales.stride(1) % 2 == 0
            and scales.stride(0) % 2 == 0)


def _grid(rows: int, heads: int, order: torch.Tensor | None) -> tuple[int, int]:
    return (heads, rows) if order is not None else (rows, heads)


def _or_any(order: torch.Tensor | None, other: torch.Tensor) -> torch.Tensor:
    """``order``, or any int32 tensor where there is none (the kernel never reads it then)."""
    return order if order is not None else other

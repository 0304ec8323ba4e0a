"""The int8 KV cache's codes as 32-bit words of four, in Triton: what the word attention kernel
(``word_attention.py``) computes with in place of one float per code.

- keys: the query quantized once per program to 15 bits (``q = step * (128 * coarse + fine)``,
  both int8, packed four to a word), so a key word's dot product with it is two ``dp4a``: exact
  integer sums where the other kernel rounds a float product per code. The query's own rounding
  (1 / 32,512 of its largest element) is below fp16's.
- values: a block's weights (scales in) rounded to 15-bit integers of the block's largest, two
  positions' weights packed as the halves of one word; one ``prmt`` interleaves two positions'
  codes byte by byte, so that one ``dp2a`` multiplies and adds a dimension's pair of codes by its
  pair of weights: exact integer sums per dimension, made floats (times the block's unit) once a
  block. The weights' rounding (1 / 65,534 of the block's largest) is below fp16's.
- writes: a vector's codes packed four to a word, its scale beside (the codes and scale
  ``decode_attention.rope_and_store`` writes).

Under Triton's CPU interpreter (the tests) the same integer and bit arithmetic runs as plain
Triton operations instead of the inline PTX (``ASM``); ``tests/gpu`` checks the PTX on the card.
"""

from __future__ import annotations

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover - Triton code
    from pipeline.engine.attention_block import int8_codes, int8_step

    ROUNDING = tl.constexpr(12582912.0)  # 1.5 x 2**23: x + this holds round(x) in its low bits (0 <= x < 2**22)

    @triton.jit
    def dp4a(words, query_words, total, ASM: tl.constexpr):
        """``total`` plus the sum of the four signed byte products of each pair of words: one
        ``dp4a``, whose own addend carries a running sum (chained, no adds between)."""
        if ASM:
            return tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r",
                                             [words, query_words, total], dtype=tl.int32, is_pure=True, pack=1)
        else:
            for byte in tl.static_range(4):
                total += ((words << (24 - 8 * byte)) >> 24) * ((query_words << (24 - 8 * byte)) >> 24)
            return total

    @triton.jit
    def dp2a(halves, codes, total, HIGH: tl.constexpr, ASM: tl.constexpr):
        """``total`` plus the two signed 16-bit halves of ``halves`` times bytes 0 and 1 of
        ``codes`` (HIGH: bytes 2 and 3), signed: one ``dp2a``, its addend a running sum."""
        if ASM:
            if HIGH:
                return tl.inline_asm_elementwise("dp2a.hi.s32.s32 $0, $1, $2, $3;", "=r,r,r,r",
                                                 [halves, codes, total], dtype=tl.int32, is_pure=True, pack=1)
            else:
                return tl.inline_asm_elementwise("dp2a.lo.s32.s32 $0, $1, $2, $3;", "=r,r,r,r",
                                                 [halves, codes, total], dtype=tl.int32, is_pure=True, pack=1)
        else:
            first = 16 if HIGH else 0  # the first byte's bit
            low_byte = (codes << (24 - first)) >> 24
            high_byte = (codes << (16 - first)) >> 24
            return total + ((halves << 16) >> 16) * low_byte + (halves >> 16) * high_byte

    @triton.jit
    def byte_pairs(first, second, ASM: tl.constexpr):
        """Two words' codes interleaved byte by byte: (first's byte 0, second's byte 0, first's
        byte 1, second's byte 1) and the same of bytes 2 and 3: a position pair's codes of two
        dimensions in each word, as ``dp2a`` takes them. One ``prmt`` each."""
        if ASM:
            return tl.inline_asm_elementwise("prmt.b32 $0, $2, $3, 0x5140; prmt.b32 $1, $2, $3, 0x7362;",
                                             "=r,=r,r,r", [first, second], dtype=(tl.int32, tl.int32),
                                             is_pure=True, pack=1)
        else:
            low = (first & 0xFF) | ((second & 0xFF) << 8) | ((first & 0xFF00) << 8) | ((second >> 8) << 24)
            high = ((first >> 16) & 0xFF) | ((second >> 8) & 0xFF00) | ((first >> 8) & 0xFF0000) | ((second >> 24) << 24)
            return low, high

    @triton.jit
    def weight_halves(first, second):
        """Two weights in [0, 32767] rounded to integers and packed as the 16-bit halves of a
        word (``first`` low): each rounded by adding 1.5 x 2**23, which leaves the integer in the
        float's low mantissa bits."""
        low = (first + ROUNDING).to(tl.int32, bitcast=True) & 0xFFFF
        return low | ((second + ROUNDING).to(tl.int32, bitcast=True) << 16)

    @triton.jit
    def rounded(x):
        """Rounded half away from zero, as int32."""
        return (x + tl.where(x >= 0, 0.5, -0.5)).to(tl.int32)

    @triton.jit
    def query_words(q, lanes):
        """The query [D / 4, 4] (float32) as two packed int8 halves (coarse, fine) of 15-bit
        codes, and its step."""
        step = tl.maximum(tl.max(tl.max(tl.abs(q), 1), 0), 1e-30) / 16256.0
        codes = rounded(q / step)  # -16256..16256
        coarse = rounded(codes.to(tl.float32) / 128.0)  # -127..127
        fine = codes - coarse * 128  # -64..64
        shifts = lanes[None, :] * 8
        return tl.sum((coarse & 0xFF) << shifts, 1), tl.sum((fine & 0xFF) << shifts, 1), step

    @triton.jit
    def store_words(cache_ptr, scale_ptr, x, lanes):
        """x [D / 4, 4] into the int8 cache as words of four codes, its scale beside: the codes and
        scale ``decode_attention.rope_and_store`` writes."""
        step = int8_step(tl.max(tl.max(tl.abs(x), 1), 0))
        codes = int8_codes(x / step)
        tl.store(cache_ptr, tl.sum((codes & 0xFF) << (lanes[None, :] * 8), 1))
        tl.store(scale_ptr, step)

    @triton.jit
    def key_dots(keys, coarse, fine, BLOCK_N: tl.constexpr, WORDS: tl.constexpr, ASM: tl.constexpr):
        """Each position's dot product of its key words [BLOCK_N, W] with the query's 15-bit codes
        (coarse and fine words [W]): the four words a lane holds summed by chained ``dp4a`` (each
        adding the last one's sum, no adds between), then across the position's four lanes."""
        k0, k1, k2, k3 = _quarters(tl.reshape(keys, [BLOCK_N, WORDS // 4, 2, 2]))
        c0, c1, c2, c3 = _quarters(tl.reshape(coarse, [WORDS // 4, 2, 2]))
        f0, f1, f2, f3 = _quarters(tl.reshape(fine, [WORDS // 4, 2, 2]))
        high = dp4a(k3, c3[None, :], dp4a(k2, c2[None, :], dp4a(k1, c1[None, :], dp4a(
            k0, c0[None, :], tl.zeros([BLOCK_N, WORDS // 4], tl.int32), ASM), ASM), ASM), ASM)
        low = dp4a(k3, f3[None, :], dp4a(k2, f2[None, :], dp4a(k1, f1[None, :], dp4a(
            k0, f0[None, :], high * 128, ASM), ASM), ASM), ASM)
        return tl.sum(low, 1)

    @triton.jit
    def _quarters(x):
        """x [..., 2, 2] as its four [...] parts: the words 4a + 0, 2, 1 and 3 of each lane's four."""
        a, b = tl.split(x)
        first, second = tl.split(a)
        third, fourth = tl.split(b)
        return first, second, third, fourth

    @triton.jit
    def value_sums(acc0, acc1, acc2, acc3, weights, values, BLOCK_N: tl.constexpr, WORDS: tl.constexpr,
                   ASM: tl.constexpr):
        """The running value sums (per byte of a word, [8, W] per lane) plus a block's weights
        ([BLOCK_N], scales in) times its value codes: the weights rounded to 15-bit integers of
        the block's largest, the codes of two positions at a time multiplied and summed by
        ``dp2a`` (exact integers, no float per code), made floats once a block."""
        GROUPS: tl.constexpr = BLOCK_N // 8
        w = tl.permute(tl.reshape(weights, [GROUPS, 8]), (1, 0))  # [8, G]: a lane's positions on the last axis
        v = tl.permute(tl.reshape(values, [GROUPS, 8, WORDS]), (1, 2, 0))  # [8, W, G]
        top = tl.maximum(tl.max(weights, 0), 1e-30)  # the block's largest weight
        w = w * (32767.0 / top)  # at most 32767 (a signed half): the largest rounds to it exactly
        zero = tl.zeros([8, WORDS], tl.int32)
        if GROUPS == 2:
            d0, d1, d2, d3 = _pair_products(zero, zero, zero, zero, w, v, WORDS, ASM)
        elif GROUPS == 4:
            d0, d1, d2, d3 = _four_products(zero, zero, zero, zero, w, v, WORDS, ASM)
        else:  # 8: blocks of 64 positions
            wa, wb = tl.split(tl.reshape(w, [8, 4, 2]))
            va, vb = tl.split(tl.reshape(v, [8, WORDS, 4, 2]))
            d0, d1, d2, d3 = _four_products(zero, zero, zero, zero, wa, va, WORDS, ASM)
            d0, d1, d2, d3 = _four_products(d0, d1, d2, d3, wb, vb, WORDS, ASM)
        unit = top / 32767.0
        return (acc0 + d0.to(tl.float32) * unit, acc1 + d1.to(tl.float32) * unit,
                acc2 + d2.to(tl.float32) * unit, acc3 + d3.to(tl.float32) * unit)

    @triton.jit
    def _four_products(d0, d1, d2, d3, w, v, WORDS: tl.constexpr, ASM: tl.constexpr):
        """``_pair_products`` of a lane's four positions (w [8, 4], v [8, W, 4]), two pairs."""
        wa, wb = tl.split(tl.reshape(w, [8, 2, 2]))
        va, vb = tl.split(tl.reshape(v, [8, WORDS, 2, 2]))
        d0, d1, d2, d3 = _pair_products(d0, d1, d2, d3, wa, va, WORDS, ASM)
        return _pair_products(d0, d1, d2, d3, wb, vb, WORDS, ASM)

    @triton.jit
    def _pair_products(d0, d1, d2, d3, w, v, WORDS: tl.constexpr, ASM: tl.constexpr):
        """The integer sums per byte of a word (d0..d3 [8, W]) plus two positions' weights (w
        [8, 2], integers in floats) times their codes (v [8, W, 2]): two ``prmt`` pair the
        positions' codes of each two dimensions, four ``dp2a`` multiply and add them."""
        wp, wq = tl.split(w)
        vp, vq = tl.split(v)
        halves = tl.broadcast_to(weight_halves(wp, wq)[:, None], [8, WORDS])
        low, high = byte_pairs(vp, vq, ASM)
        return (dp2a(halves, low, d0, False, ASM), dp2a(halves, low, d1, True, ASM),
                dp2a(halves, high, d2, False, ASM), dp2a(halves, high, d3, True, ASM))

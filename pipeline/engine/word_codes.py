"""The int8 KV cache's codes as 32-bit words of four, in Triton: what the word attention kernel
(``word_attention.py``) computes with in place of one float per code.

- keys: the query quantized once per program to 15 bits (``q = step * (128 * coarse + fine)``,
  both int8, packed four to a word), so a key word's dot product with it is two ``dp4a``: exact
  integer sums where the other kernel rounds a float product per code. The query's own rounding
  (1 / 32,512 of its largest element) is below fp16's.
- values: each code, biased to 0..255, placed by one ``prmt`` in the mantissa of 1.0 (the float
  1 + b / 2**15); a block's weighted sum of those is the weighted sum of the codes plus the weights'
  sum times 1 + 2**-8, which is taken away per block: each block's products are added to the
  running sum less that block's offset (so the sum never carries more than one block's offset,
  and rounds relative to the values, not to the offsets of every block before).
- writes: a vector's codes packed four to a word, its scale beside (the codes and scale
  ``decode_attention.rope_and_store`` writes).

Under Triton's CPU interpreter (the tests) the same integer and bit arithmetic runs as plain
Triton operations instead of the inline PTX (``ASM``); ``tests/gpu`` checks the PTX on the card.
"""

from __future__ import annotations

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover - Triton code
    from pipeline.engine.attention_block import int8_codes, int8_step

    BIAS = tl.constexpr(1.0 + 128.0 / 32768.0)  # the float a value code of 0 becomes: 1 + (0 + 128) / 2**15
    SIGN_BITS = tl.constexpr(-2139062144)  # 0x80808080: each byte's top bit, flipped to add 128 to its code

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
    def byte_floats(biased, ASM: tl.constexpr):
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

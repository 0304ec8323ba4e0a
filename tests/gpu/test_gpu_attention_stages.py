"""On a GPU, the decode attention kernel with its loads pipelined (``STAGES`` 2 or 3, a
``tl.range`` loop the CPU interpreter cannot run) attends exactly as the while loop does: each
slot over its own first ``used`` positions (1, a block's edge, the whole cache), from a
half-precision and from an int8 cache; an int8 cache's codes made floats by their bits
(``INT8_BITS``) give the conversion instruction's output, at one and two stages; the word kernel
pipelined and its programs longest slot first attend as its while loop does."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import pipeline.engine.decode_attention as da
import pipeline.engine.kv_int8 as kv_int8

pytestmark = pytest.mark.gpu


def cache(quantized: bool) -> tuple[Any, ...]:
    """A query, keys, values, lengths and scales (None for half precision) of nine slots."""
    generator = torch.Generator(device="cuda").manual_seed(7)
    rows, heads, positions, dim = 9, 12, 200, 64
    used = torch.tensor([1, 31, 32, 33, 64, 100, 199, 200, 2], dtype=torch.int32, device="cuda")
    query = torch.randn(rows, heads, dim, device="cuda", dtype=torch.float16, generator=generator)
    shape = (rows, heads, positions, dim)
    if quantized:
        keys = torch.randint(-127, 128, shape, device="cuda", dtype=torch.int8, generator=generator)
        values = torch.randint(-127, 128, shape, device="cuda", dtype=torch.int8, generator=generator)
        scales = ((torch.rand(shape[:3], device="cuda", generator=generator) / 64).to(kv_int8.SCALE_DTYPE),
                  (torch.rand(shape[:3], device="cuda", generator=generator) / 64).to(kv_int8.SCALE_DTYPE))
    else:
        keys = torch.randn(shape, device="cuda", dtype=torch.float16, generator=generator)
        values = torch.randn(shape, device="cuda", dtype=torch.float16, generator=generator)
        scales = (None, None)
    return query, keys, values, used, *scales


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("quantized", [False, True])
def test_pipelined_loads_attend_as_the_while_loop_does(stages: int, quantized: bool, monkeypatch: Any) -> None:
    query, keys, values, used, *scales = cache(quantized)

    monkeypatch.setattr(da, "STAGES", 1)
    looped = da.decode_attention(query, keys, values, used, *scales, kernel="single")
    monkeypatch.setattr(da, "STAGES", stages)
    shaped = da.decode_attention(query, keys, values, used, *scales, kernel="single")

    torch.testing.assert_close(shaped.float(), looped.float(), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("stages", [1, 2])
def test_int8_codes_made_floats_by_their_bits_attend_as_the_conversion_does(stages: int, monkeypatch: Any) -> None:
    query, keys, values, used, *scales = cache(quantized=True)
    keys[0, 0, 0, :2], values[0, 0, 0, :2] = -128, 127  # the codes' extremes
    monkeypatch.setattr(da, "STAGES", stages)

    monkeypatch.setattr(da, "INT8_BITS", False)
    converted = da.decode_attention(query, keys, values, used, *scales, kernel="single")
    monkeypatch.setattr(da, "INT8_BITS", True)
    by_bits = da.decode_attention(query, keys, values, used, *scales, kernel="single")

    # the same floats go in (the interpreter holds them equal bit for bit); the compiler may order
    # the sums otherwise around other instructions, so within half precision's rounding
    torch.testing.assert_close(by_bits.float(), converted.float(), atol=1e-3, rtol=1e-3)



def test_the_int8_cache_read_as_words_attends_as_the_single_kernel_does() -> None:
    """The word kernel's inline PTX (dp4a, prmt), which the CPU interpreter never runs, gives the
    interpreter's arithmetic: the single kernel's output within half precision, and nothing past
    a slot's length (other codes, NaN scales) reaches it."""
    query, keys, values, used, *scales = cache(quantized=True)
    keys[0, 0, 0, :2], values[0, 0, 0, :2] = -128, 127  # the codes' extremes

    single = da.decode_attention(query, keys, values, used, *scales, kernel="single")
    words = da.decode_attention(query, keys, values, used, *scales, kernel="words")
    torch.testing.assert_close(words.float(), single.float(), atol=2e-3, rtol=2e-3)

    past = torch.arange(keys.shape[2], device="cuda")[None, :] >= used[:, None]  # [rows, positions]
    keys[past.nonzero(as_tuple=True)[0], :, past.nonzero(as_tuple=True)[1]] = 99
    for scale in scales:
        scale.masked_fill_(past[:, None, :], float("nan"))
    assert torch.equal(da.decode_attention(query, keys, values, used, *scales, kernel="words"), words)


@pytest.mark.parametrize("stages", [2, 3])
def test_the_word_kernel_pipelined_and_longest_first_attends_as_its_while_loop(stages: int, monkeypatch: Any) -> None:
    """Its loads copied ahead into shared memory (the scales two to a word) and its programs
    started longest slot first: the while loop's output, and still nothing past a slot's length
    (NaN scales) reaches it."""
    from pipeline.engine import word_attention as wa

    query, keys, values, used, *scales = cache(quantized=True)
    looped = wa.word_decode_attention(query, keys, values, used, *scales)
    monkeypatch.setattr(wa, "STAGES", stages)
    assert wa._paired(scales[0])
    past = torch.arange(keys.shape[2], device="cuda")[None, :] >= used[:, None]
    for scale in scales:
        scale.masked_fill_(past[:, None, :], float("nan"))
    for order in (None, wa.longest_first(used)):
        got = wa.word_decode_attention(query, keys, values, used, *scales, order=order)
        torch.testing.assert_close(got.float(), looped.float(), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("stages", [1, 2])
def test_rope_and_the_cache_write_inside_the_word_kernel_on_the_card(stages: int, monkeypatch: Any) -> None:
    """Compiled (inline PTX, the barrier between the write and the reads), the kernel with RoPE and
    the cache write inside writes the codes and scales ``rope_and_store`` writes and attends as
    the word kernel does after it; a slot whose row ended gets zeros. Pipelined (2 stages, its
    programs longest slot first), the loads copied ahead see the position it has just written."""
    from pipeline.engine import word_attention

    monkeypatch.setattr(word_attention, "STAGES", stages)

    _, keys, values, _, key_scales, value_scales = cache(quantized=True)
    rows, heads, positions, dim = keys.shape
    generator = torch.Generator(device="cuda").manual_seed(3)
    qkv = torch.randn(rows, 3 * heads * dim, device="cuda", dtype=torch.float16, generator=generator)
    residual = torch.randn(rows, heads * dim, device="cuda", dtype=torch.float16, generator=generator) * 4
    angles = torch.rand(rows, dim // 2, device="cuda", generator=generator) * 6.28
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    write_at = torch.tensor([0, 30, 31, 32, 63, 99, 198, 199, 1], device="cuda")
    used = da.attended_lengths(write_at, torch.arange(rows, device="cuda") != 4)
    apart = [t.clone() for t in (keys, values, key_scales, value_scales)]
    query = da.rope_and_store(qkv, residual, 1e-5, cos, sin, apart[0], apart[1], write_at, apart[2], apart[3])
    want = da.decode_attention(query, apart[0], apart[1], used, apart[2], apart[3], kernel="words")
    order = word_attention.longest_first(used) if stages > 1 else None
    got = word_attention.rope_word_attention(qkv, residual, 1e-5, cos, sin, keys, values, write_at, used, key_scales, value_scales,
                                             order=order)
    assert (keys.int() - apart[0].int()).abs().max().item() <= 1  # an FMA's rounding may move a code
    assert (values.int() - apart[1].int()).abs().max().item() <= 1
    torch.testing.assert_close(key_scales, apart[2], atol=0, rtol=1e-6)
    torch.testing.assert_close(value_scales, apart[3], atol=0, rtol=1e-6)
    torch.testing.assert_close(got.float(), want.float(), atol=2e-3, rtol=2e-3)
    assert got[4].abs().max().item() == 0.0

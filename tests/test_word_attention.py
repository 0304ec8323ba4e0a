"""The decode attention kernel that reads the int8 cache as 32-bit words (word_attention.py):
under Triton's CPU interpreter it attends as the float64 reference does over the dequantized
cache, to well within half precision, whatever the attention's shape; what lies past a slot's
length (codes, NaN scales) never reaches its output; and the kernel compiles, inline PTX and
all, for the H100/H200, its loop issuing fewer than half the instructions per cached position
of the kernel it replaces (a count from the compiled code, not a clock)."""

from __future__ import annotations

from tests.test_engine_kernels import compiled_for_hopper, worst_error_under_the_interpreter

WORD_CHECK = """
import torch
from pipeline.engine import decode_attention as da, kv_int8
from tests.attention_reference import reference_attention
torch.manual_seed(5)
B, P, H, D = 7, 136, 2, 64  # a capacity that is no multiple of the kernel's 32-position block
used = torch.tensor([1, 31, 32, 33, 100, 135, 136], dtype=torch.int32)
keys, values = torch.randn(B, H, P, D), torch.randn(B, H, P, D) + 0.05
(kq, ks), (vq, vs) = kv_int8.quantize(keys), kv_int8.quantize(values)
kq[0, 0, 0, :2], vq[0, 0, 0, :2] = torch.tensor([-128, 127], dtype=torch.int8), torch.tensor([127, -128], dtype=torch.int8)
exact_k, exact_v = kv_int8.dequantize(kq, ks, torch.float64), kv_int8.dequantize(vq, vs, torch.float64)
worst = 0.0
for sharpness in (0.0, 1.0, 8.0):  # even attention (outputs near zero), a model's, one position dominant
    q = torch.randn(B, H, D) * sharpness
    want = reference_attention(q.double(), exact_k, exact_v, used).double()
    got = da.decode_attention(q, kq, vq, used, ks, vs, kernel="words").double()
    worst = max(worst, ((got - want).norm() / want.norm()).item())
# past each slot's length: other codes and NaN scales change nothing
noisy = [t.clone() for t in (kq, vq, ks, vs)]
for b, n in enumerate(used.tolist()):
    for t in noisy:
        t[b, :, n:] = torch.randint(-128, 128, t[b, :, n:].shape).to(t.dtype) if t.dtype == torch.int8 else float("nan")
assert torch.equal(da.decode_attention(q, *noisy[:2], used, *noisy[2:], kernel="words").double(), got)
# other blocks, the scales read two to a word, the slots' programs in another order: the same attention
from pipeline.engine import word_attention as wa
for block in (16, 64):
    wa.BLOCK_POSITIONS = block
    other = da.decode_attention(q, kq, vq, used, ks, vs, kernel="words").double()
    worst = max(worst, ((other - want).norm() / want.norm()).item())
wa.BLOCK_POSITIONS = 32
wa.SCALE_WORDS = True
paired = wa.word_decode_attention(q, kq, vq, used, ks, vs).double()
assert torch.equal(paired, got) and wa._paired(ks)
assert torch.equal(wa.word_decode_attention(q, *noisy[:2], used, *noisy[2:]).double(), got)  # NaN scales past the end
odd = [t[:, :, :135].contiguous() for t in (kq, vq, ks, vs)]  # an odd capacity: the scales one at a time
assert not wa._paired(odd[2]) and torch.equal(wa.word_decode_attention(q, *odd[:2], used.clamp(max=135), *odd[2:]).double(),
                                                da.decode_attention(q, *odd[:2], used.clamp(max=135), *odd[2:], kernel="words").double())
assert torch.equal(wa.word_decode_attention(q, kq, vq, used, ks, vs, order=wa.longest_first(used)).double(), got)
wa.SCALE_WORDS = None
# fp16 queries, as the engine runs it: the same output as the other kernel within half precision
q = torch.randn(B, H, D).half()
single = da.decode_attention(q, kq, vq, used, ks, vs, kernel="single").float()
words = da.decode_attention(q, kq, vq, used, ks, vs, kernel="words")
assert words.dtype == torch.float16
worst = max(worst, ((words.float() - single).abs() / single.abs().clamp(min=0.05)).max().item() / 20)
print(worst)
"""


def test_the_word_kernel_attends_as_the_reference_over_the_dequantized_cache() -> None:
    # ~1e-4: the query's 15-bit codes and the values' float offset (the other kernel: ~1e-6);
    # half precision's own rounding is 4.9e-4
    assert worst_error_under_the_interpreter(WORD_CHECK) < 3e-4


def test_the_word_kernel_compiles_for_hopper_with_half_the_instructions_per_position(tmp_path) -> None:
    codes = compiled_for_hopper(tmp_path)
    words, single = codes["words"], codes["single"]
    assert words["dp4a"] == 32 and words["byte_loads"] == 0  # keys by dot products, words loaded whole
    assert words["per_position"] < single["per_position"] / 2
    assert words["registers"] <= 80  # 25 programs of one warp fit an SM, as the other kernel's do
    # a lane's key words summed by chained dp4a, two positions' values at a time by dp2a (10.5 before)
    assert words["per_position"] <= 9
    # with RoPE and the cache write before the loop: the same loop (give or take what the compiler
    # schedules otherwise), no more registers, no spills
    rope = codes["rope-words"]
    assert abs(rope["per_position"] / words["per_position"] - 1) < 0.05
    assert rope["registers"] <= 80 and rope["spills"] == 0
    assert words["copies"] == 0 and words["loads"] > 0  # one stage: the loop loads into registers


def test_pipelined_word_kernels_copy_every_cache_load_into_shared_memory(tmp_path) -> None:
    # two stages: the codes and the scales (two to a word) copied in ahead, no load of the loop
    # holds up its block, in the registers of one stage (25 programs to an SM), nothing spilled
    codes = compiled_for_hopper(tmp_path, "--stages", "2")
    for kernel in ("words", "rope-words"):
        code = codes[kernel]
        assert code["stages"] == 2 and code["copies"] >= 10 and code["loads"] == 0, code
        assert code["registers"] <= 80 and code["spills"] == 0 and code["dp4a"] == 32


ROPE_INSIDE_CHECK = """
import torch
from pipeline.engine import decode_attention as da, word_attention as wa
torch.manual_seed(11)
B, P, H, D = 7, 100, 3, 64
qkv = torch.randn(B, 3 * H * D).half() * 2
residual = (torch.randn(B, H * D) * torch.arange(1, B + 1)[:, None]).half()  # the rows qkv is a projection of
angles = torch.arange(P).float()[:, None] / (10000 ** (torch.arange(D // 2).float() / (D // 2)))
cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
at = torch.tensor([0, 5, 31, 32, 64, 98, 99])
used = (at + 1).to(torch.int32) * torch.tensor([1, 1, 1, 0, 1, 1, 1], dtype=torch.int32)  # one slot's row ended
def cache():  # earlier positions already hold codes and scales
    return (torch.randint(-127, 128, (B, H, P, D), dtype=torch.int8), torch.randint(-127, 128, (B, H, P, D), dtype=torch.int8),
            torch.rand(B, H, P) / 50, torch.rand(B, H, P) / 50)
torch.manual_seed(12)
apart = cache()
torch.manual_seed(12)
together = cache()
query = da.rope_and_store(qkv, residual, 1e-5, cos[at], sin[at], apart[0], apart[1], at, apart[2], apart[3])
want = da.decode_attention(query, apart[0], apart[1], used, apart[2], apart[3], kernel="words")
got = wa.rope_word_attention(qkv, residual, 1e-5, cos[at], sin[at], together[0], together[1], at, used, together[2], together[3])
for mine, theirs in zip(together, apart):
    assert torch.equal(mine, theirs)  # the same codes and scales written, at the same places
assert got.dtype == torch.float16 and torch.equal(got, want)
assert got[3].abs().max().item() == 0.0  # the ended slot attends to nothing
torch.manual_seed(12)
ordered = cache()  # the programs longest slot first: the same writes and attention
wa.SCALE_WORDS = True
assert torch.equal(wa.rope_word_attention(qkv, residual, 1e-5, cos[at], sin[at], ordered[0], ordered[1], at, used, ordered[2],
                                          ordered[3], order=wa.longest_first(used)), got)
assert all(torch.equal(mine, theirs) for mine, theirs in zip(ordered, apart))
print(0.0)
"""


def test_rope_and_the_cache_write_inside_the_word_kernel_write_and_attend_as_the_two_kernels_do() -> None:
    # bit for bit under the interpreter: the same rotation, rounding, codes, scales and attention
    assert worst_error_under_the_interpreter(ROPE_INSIDE_CHECK) == 0.0

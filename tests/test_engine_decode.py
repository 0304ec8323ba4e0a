"""The decode loop's continuous batching and its sampler, on tiny synthetic weights on the CPU.

Continuous batching must be invisible in the output: a sentence's tokens are the same whether it
runs alone, in one batch with every other, or enters a slot another sentence just left. The
sampler must draw from the right distribution: checked against transformers' top-p/top-k warpers
and upstream ChatTTS's repetition penalty on fixed logits.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from pipeline.engine.sampling import (
    RowSampling,
    apply_penalty,
    choose,
    noise_cells,
)
from pipeline.types import SynthesisRequest
from tests.test_engine_tiny import upstream, upstream_greedy_codes  # noqa: F401 (fixture)

TEXTS = ["今天天气很好我们去公园散步", "The quick brown fox jumps over it.", "混合 mixed 文本",
         "一个很长很长的句子，里面有许多许多的字。", "Short.", "Another line, a little longer.",
         "最后一句"]


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Engine:
    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


def requests_for(engine: Engine, greedy: bool) -> list[SynthesisRequest]:
    voices = [engine.sample_voice(1), engine.sample_voice(2)]
    lengths = [20, 14, 9, 31, 5, 17, 12]
    return [SynthesisRequest(text=t, voice=voices[i % 2], seed=40 + i, max_new_tokens=n,
                             min_new_tokens=0 if not greedy and i % 3 == 0 else n,
                             top_k=1 if greedy else 20, repetition_penalty=1.05)
            for i, (t, n) in enumerate(zip(TEXTS, lengths))]


def codes_with_slots(engine: Engine, requests: list[SynthesisRequest],
                     slots: int | None) -> list[Any]:
    engine.slots = slots
    try:
        return engine.generate_codes(requests)
    finally:
        engine.slots = None


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_refilled_slots_give_every_sentence_upstreams_greedy_tokens(engine: Engine, upstream: Any,
                                                                    slots: int) -> None:
    requests = requests_for(engine, greedy=True)
    ours = codes_with_slots(engine, requests, slots)
    for row, req in enumerate(requests):
        expected = upstream_greedy_codes(upstream, req.text, req.voice, req.max_new_tokens)[0]
        assert torch.equal(ours[row], expected), f"sentence {row} with {slots} slots"


def test_sampled_tokens_do_not_depend_on_slots_refills_or_batch_mates(engine: Engine) -> None:
    requests = requests_for(engine, greedy=False)
    reference = codes_with_slots(engine, requests, None)
    for slots in (1, 2, 5):
        got = codes_with_slots(engine, requests, slots)
        assert all(torch.equal(a, b) for a, b in zip(got, reference)), f"{slots} slots"
    alone = [engine.generate_codes([r])[0] for r in requests]
    assert all(torch.equal(a, b) for a, b in zip(alone, reference))


@pytest.mark.parametrize("slots", [2, 5])
def test_rows_ending_at_eos_free_their_slot_for_the_next_sentence(engine: Engine,
                                                                  slots: int) -> None:
    from pipeline.engine.generation import RowLimits, TokenSpace, generate
    from pipeline.engine.prompts import code_prompt_row, code_prompt_text, embed_prompts
    from pipeline.engine.voices import parse_voice

    parts = engine._parts
    emb = parts.embeddings
    eos = emb.vocab - 1

    def eos_loving_logits(hidden: torch.Tensor) -> torch.Tensor:
        logits = emb.code_logits(hidden)
        logits[:, :, eos] = 1e4  # the model always wants to stop, once allowed to
        return logits

    space = TokenSpace(codebooks=emb.codebooks, vocab=emb.vocab, eos=eos, embed=emb.code_embed,
                       logits=eos_loving_logits)
    voice = parse_voice(engine.sample_voice(0), parts.gpt.hidden, emb.codebooks)
    texts = TEXTS[:5]
    token_ids = engine._tokenize([code_prompt_text(t, "[speed_5]", voice) for t in texts])
    rows = [code_prompt_row(ids, voice) for ids in token_ids]
    prompts = embed_prompts(rows, emb, engine._spk_emb_id, torch.device("cpu"))
    sampling = RowSampling.build([0.3] * 5, [0.7] * 5, [20] * 5, [1.05] * 5, list(range(5)),
                                 torch.device("cpu"))
    limits = RowLimits(min_new=[0, 5, 11, 2, 7], max_new=[30, 30, 9, 30, 30])
    with torch.inference_mode():
        out = generate(parts.gpt, space, prompts, limits, sampling, check_every=4, slots=slots)
    assert [t.shape[0] for t in out.tokens] == [0, 5, 9, 2, 7]
    assert out.hit_limit == [False, False, True, False, False]
    assert all((t != eos).all() for t in out.tokens)
    assert [h.shape[0] for h in out.hiddens] == [0, 5, 9, 2, 7]


def test_few_live_rows_move_to_a_smaller_bucket_and_keep_their_tokens(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    voice = engine.sample_voice(3)
    # 4 slots: the short last sentence enters slot 3 when its 19-step row ends; once the three
    # 20-step rows end it is alone at the back, and moves to the front (a 1-slot step).
    lengths = [20, 20, 20, 19, 5]
    requests = [SynthesisRequest(text=TEXTS[i], voice=voice, seed=i, max_new_tokens=n,
                                 min_new_tokens=n, top_k=1) for i, n in enumerate(lengths)]
    with caplog.at_level(logging.DEBUG, logger="pipeline.engine.generation"):
        together = codes_with_slots(engine, requests, 4)
    assert any("compacted slots" in r.getMessage() for r in caplog.records)
    for req, codes in zip(requests, together):
        assert torch.equal(codes, engine.generate_codes([req])[0])
        assert codes.shape[0] == req.max_new_tokens


def test_slots_are_kept_between_batches_and_grow_when_needed(engine: Engine) -> None:
    voice = engine.sample_voice(4)
    small = [SynthesisRequest(text=t, voice=voice, seed=i, max_new_tokens=6, min_new_tokens=6)
             for i, t in enumerate(TEXTS[:3])]
    engine.synthesize(small)
    first = engine._runner.state
    engine.synthesize(small[:2])
    assert engine._runner.state is first, "a smaller batch reuses the slots"
    longer = [SynthesisRequest(text=t, voice=voice, seed=i, max_new_tokens=200,
                               min_new_tokens=200) for i, t in enumerate(TEXTS)]
    results = engine.synthesize(longer)
    assert engine._runner.state is not first and engine._runner.state.shape.capacity == 7
    assert [r.gpt_steps for r in results] == [200] * 7
    engine.release_slots()
    assert engine._runner.state is None


def test_the_phase_clock_accounts_for_prefill_steps_and_waveform(engine: Engine) -> None:
    engine.clock.reset()
    voice = engine.sample_voice(6)
    engine.synthesize([SynthesisRequest(text=t, voice=voice, seed=i, max_new_tokens=10,
                                        min_new_tokens=10) for i, t in enumerate(TEXTS[:3])])
    totals = engine.clock.totals()
    assert all(totals[p] > 0 for p in ("prefill", "gpt_steps", "waveform"))
    assert engine.clock.steps == 10
    assert engine.clock.step_bytes > 10 * sum(p.numel() * 4 for p in engine._parts.gpt.parameters())


# ------------------------------------------------------------------------------ the int8 KV cache
@pytest.fixture(scope="module")
def int8_kv_engine(tiny_model_dir: Path) -> Engine:
    """fp32 weights, keys and values kept in int8 (what TTS_JOBS_KV_CACHE=int8 selects; the
    default on the GPU's half-precision path)."""
    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32",
                                    kv_cache="int8"))


def test_teacher_forcing_through_the_decode_path_reproduces_greedy_generation(
        engine: Engine) -> None:
    """The fidelity check scores the decode path itself: forced on greedy tokens, its arg-max is
    those tokens at every step (EOS left out: below a row's floor it is masked, and where it wins
    above it the row ends, so no kept step chose it)."""
    requests = requests_for(engine, greedy=True)
    codes = engine.generate_codes(requests)
    logits = engine.score_codes(requests, codes)
    for row, (c, lg) in enumerate(zip(codes, logits)):
        assert lg.shape[:2] == c.shape
        assert torch.equal(lg[..., :-1].argmax(-1), c), f"sentence {row}"


def test_an_int8_kv_cache_takes_a_quarter_of_fp32s_bytes_and_stays_close(
        engine: Engine, int8_kv_engine: Engine) -> None:
    from pipeline.bench import fidelity

    requests = requests_for(engine, greedy=True)
    int8_kv_engine.synthesize(requests[:2])
    engine.synthesize(requests[:2])
    quantized, full = int8_kv_engine._runner.state.cache, engine._runner.state.cache
    assert quantized.keys[0].dtype == torch.int8 and quantized.quantized and not full.quantized
    q_bytes = sum(t.numel() * t.element_size() for t in quantized.tensors())
    f_bytes = sum(t.numel() * t.element_size() for t in full.tensors())
    assert q_bytes < 0.3 * f_bytes  # 1 byte + 4 bytes of scale per head-vector, against 4
    result = fidelity.compare(engine, int8_kv_engine, requests)
    # measured: 1.0 and 2e-5 (tiny widths weigh attention lightly); reading the codes with a
    # wrong scale gives 0.98 and 1e-2
    assert result.top1_agreement >= 0.995, result
    assert result.relative_logit_error <= 1e-3, result


def test_with_an_int8_kv_cache_tokens_still_do_not_depend_on_slots(int8_kv_engine: Engine) -> None:
    requests = requests_for(int8_kv_engine, greedy=False)
    reference = codes_with_slots(int8_kv_engine, requests, None)
    for slots in (1, 3):
        got = codes_with_slots(int8_kv_engine, requests, slots)
        assert all(torch.equal(a, b) for a, b in zip(got, reference)), f"{slots} slots"


# ------------------------------------------------------------------------------ the sampler
VOCAB = 12


def fixed_logits() -> torch.Tensor:
    return torch.tensor([2.0, 1.6, 1.5, 1.1, 0.9, 0.3, 0.0, -0.4, -0.8, -1.5, -2.0, -3.0])


def draw(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, penalty: float,
         window: torch.Tensor, draws: int, candidates: int = 0) -> np.ndarray:
    """``draws`` samples of one (row, codebook) with these logits: one row per seed, as the loop
    draws them (temperature, penalty, then top-p/top-k and the hashed Gumbel noise), ranking
    the best ``candidates`` tokens only, or all of them (0)."""
    rows = draws
    sampling = RowSampling.build([temperature] * rows, [top_p] * rows, [top_k] * rows,
                                 [penalty] * rows, list(range(rows)), torch.device("cpu"))
    sampling = dataclasses.replace(sampling, candidates=candidates)
    scaled = logits.expand(rows, 1, VOCAB) / sampling.temperature
    scaled = apply_penalty(scaled, window.expand(rows, 1, -1).contiguous(), sampling.penalty)
    step = torch.full((rows,), 7, dtype=torch.int64)
    tokens = choose(scaled, sampling, step, noise_cells(1, VOCAB, torch.device("cpu")))[:, 0]
    return np.bincount(tokens.numpy(), minlength=VOCAB)


def reference_probabilities(logits: torch.Tensor, temperature: float, top_p: float, top_k: int,
                            penalty: float, window: torch.Tensor) -> np.ndarray:
    """The same distribution from the reference implementations: upstream ChatTTS's repetition
    penalty processor, then transformers' TopPLogitsWarper and TopKLogitsWarper."""
    from ChatTTS.model.processors import CustomRepetitionPenaltyLogitsProcessorRepeat
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    scores = (logits / temperature).unsqueeze(0)
    processor = CustomRepetitionPenaltyLogitsProcessorRepeat(penalty, VOCAB, 16)
    scores = processor(window.unsqueeze(0), scores.clone())
    scores = TopPLogitsWarper(top_p, min_tokens_to_keep=min(3, top_k))(None, scores)
    scores = TopKLogitsWarper(top_k)(None, scores)
    return torch.softmax(scores, -1)[0].double().numpy()


@pytest.mark.parametrize("temperature,top_p,top_k,penalty,candidates", [
    (1.0, 1.0, VOCAB, 1.0, 0),  # plain softmax
    (0.7, 0.7, 20, 1.0, 0),  # upstream's defaults: the nucleus decides
    (0.3, 0.9, 4, 1.0, 0),  # top-k decides
    (1.0, 0.95, 8, 1.3, 0),  # repetition penalty on a window of recent tokens
    # the same with only the best few tokens ranked (the GPU loop's default): the nucleus still
    # weighs them against the whole vocabulary
    (0.7, 0.7, 6, 1.0, 6),
    (0.3, 0.9, 4, 1.0, 5),
    (1.0, 0.95, 8, 1.3, 8),
])
def test_the_sampler_draws_from_the_reference_distribution(temperature: float, top_p: float,
                                                           top_k: int, penalty: float,
                                                           candidates: int) -> None:
    logits = fixed_logits()
    window = torch.tensor([0, 0, 0, 1, 3, 3] + [VOCAB] * 10)  # token 0 three times, 1 once, 3 twice
    draws = 40_000
    counts = draw(logits, temperature, top_p, top_k, penalty, window, draws, candidates)
    expected = reference_probabilities(logits, temperature, top_p, top_k, penalty,
                                       window[window < VOCAB])
    assert counts[expected == 0].sum() == 0, "a token outside the nucleus/top-k was drawn"
    kept = expected > 0
    # Pearson's chi-square over the kept tokens; 99.99th percentile for <= 11 degrees of freedom
    # is below 40, while a wrong temperature or a missing penalty gives thousands.
    chi2 = float((((counts[kept] - draws * expected[kept]) ** 2) / (draws * expected[kept])).sum())
    assert chi2 < 40.0, (chi2, counts, np.round(expected * draws))


def test_the_penalty_touches_only_window_tokens_by_penalty_to_the_count() -> None:
    """Bit for bit the dense rule (every token's logit times or over penalty**count), with
    repeated tokens, empty window entries and token 0 both in and out of the window."""
    generator = torch.Generator().manual_seed(1)
    rows, vocab = 64, 50
    logits = torch.randn(rows, 4, vocab, generator=generator) * 2
    window = torch.randint(0, 6, (rows, 4, 16), generator=generator)  # many repeats
    window[: rows // 2, :, 10:] = vocab  # empty entries
    window[rows // 4:, 0] = torch.where(window[rows // 4:, 0] == 0, 1, window[rows // 4:, 0])
    penalty = torch.rand(rows, 1, 1, generator=generator) + 0.8
    counts = torch.zeros(rows, 4, vocab + 1).scatter_add_(2, window, torch.ones(rows, 4, 16))
    alpha = torch.pow(penalty, counts[:, :, :vocab])
    dense = torch.where(logits < 0, logits * alpha, logits / alpha)
    assert torch.equal(apply_penalty(logits.clone(), window, penalty), dense)
    assert not torch.equal(dense, logits)


def test_ranking_the_best_candidates_draws_the_tokens_a_full_sort_draws() -> None:
    """The loop ranks only a bucket of best tokens (``candidate_count``): on ChatTTS-sized logits
    (4 codebooks x 626 tokens, a mix of settings per row) every draw equals the full sort's."""
    generator = torch.Generator().manual_seed(0)
    rows, vocab = 512, 626
    logits = torch.randn(rows, 4, vocab, generator=generator) * 3
    top_k = [int(k) for k in torch.randint(1, 33, (rows,), generator=generator)]
    top_p = [float(p) for p in torch.rand(rows, generator=generator) * 0.9 + 0.1]
    sampling = RowSampling.build([1.0] * rows, top_p, top_k, [1.0] * rows, list(range(rows)),
                                 torch.device("cpu"))
    assert sampling.candidates == 32
    step = torch.arange(rows)
    cells = noise_cells(4, vocab, torch.device("cpu"))
    ranked = choose(logits.clone(), sampling, step, cells)
    everything = choose(logits.clone(), dataclasses.replace(sampling, candidates=0), step, cells)
    assert torch.equal(ranked, everything)
    assert len(set(ranked.flatten().tolist())) > 100  # draws spread, not one argmax


def test_the_sampler_test_can_tell_a_wrong_distribution() -> None:
    """The same statistic rejects a sampler that ignores the temperature."""
    logits, window = fixed_logits(), torch.tensor([VOCAB] * 16)
    counts = draw(logits, 1.0, 1.0, VOCAB, 1.0, window, 40_000)
    wrong = reference_probabilities(logits, 0.7, 1.0, VOCAB, 1.0, torch.tensor([], dtype=torch.int64))
    chi2 = float((((counts - 40_000 * wrong) ** 2) / (40_000 * wrong)).sum())
    assert chi2 > 400.0


# ------------------------------------------------------------------------------ the GPU kernel
KERNEL_CHECK = """
import math, torch
from pipeline.engine import decode_attention as da, kv_int8
torch.manual_seed(0)
B, P, H, D = 6, 200, 3, 64
q = torch.randn(B, H, D).half()
k = torch.randn(B, H, P, D).half()
v = torch.randn(B, H, P, D).half()
used = torch.tensor([1, 63, 64, 65, 130, 200], dtype=torch.int32)

def reference(keys, values):
    out = torch.empty(B, H, D)
    for b in range(B):
        n = int(used[b])
        s = torch.einsum("hd,hpd->hp", q[b].float(), keys[b, :, :n].float()) / math.sqrt(D)
        out[b] = torch.einsum("hp,hpd->hd", s.softmax(-1), values[b, :, :n].float())
    return out

worst = (da.decode_attention(q, k, v, used).float() - reference(k, v)).abs().max().item()
# int8 cache: the kernel against the same attention over the dequantized cache
(kq, ks), (vq, vs) = kv_int8.quantize(k), kv_int8.quantize(v)
got = da.decode_attention(q, kq, vq, used, ks, vs).float()
want = reference(kv_int8.dequantize(kq, ks, torch.float32), kv_int8.dequantize(vq, vs, torch.float32))
worst = max(worst, (got - want).abs().max().item())

# RoPE + cache write against the PyTorch path (rotate_half), each slot at its own position
from pipeline.engine.layer_ops import apply_rope as _apply_rope
qkv = torch.randn(B, 3 * H * D).half()
angles = torch.arange(P).float()[:, None] / (10000 ** (torch.arange(D // 2).float() / (D // 2)))
table_cos, table_sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
at = torch.tensor([0, 5, 63, 64, 100, 199])
keys, values = torch.zeros(B, H, P, D).half(), torch.zeros(B, H, P, D).half()
query = da.rope_and_store(qkv, table_cos[at], table_sin[at], keys, values, at)
parts = qkv.float().view(B, 3, H, D)
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
kscale, vscale = torch.zeros(B, H, P), torch.zeros(B, H, P)
da.rope_and_store(qkv, table_cos[at], table_sin[at], keys8, values8, at, kscale, vscale)
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
                         key_scales=[torch.zeros(B, H, P)] if quantized else [],
                         value_scales=[torch.zeros(B, H, P)] if quantized else [],
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
print(worst)
"""


def test_the_gpu_decode_kernels_match_the_pytorch_path() -> None:
    """The Triton kernels the H200 runs, under Triton's CPU interpreter: one query per slot
    against exactly its first ``used`` positions (1, a block edge, the whole cache), from a
    half-precision and from an int8 cache; RoPE and the cache write (and int8 quantization) at
    each slot's own position, as the PyTorch path does them."""
    assert worst_error_under_the_interpreter(KERNEL_CHECK) < 2e-3


def worst_error_under_the_interpreter(script: str) -> float:
    """Run a kernel check in a fresh process under Triton's CPU interpreter (it is read when
    Triton is imported); the check prints its worst error last."""
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {**__import__("os").environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1])


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
for rows, inner in ((4, 3072), (2, 1000)):  # three programs a row; a ragged last block
    gate_up = (torch.randn(rows, 1, 2 * inner) * 3).half()
    got = lk.silu_mul(gate_up)
    want = _silu_mul(gate_up.float())
    assert got.shape == (rows, 1, inner)
    worst = max(worst, ((got.float() - want).abs() / want.abs().clamp(min=1)).max().item())
print(worst)
"""


def test_the_fused_layer_kernels_match_the_pytorch_ops() -> None:
    """The residual add + RMSNorm and SiLU × up kernels the GPU runs between a layer's GEMMs,
    under Triton's CPU interpreter: the residual stream bit for bit as PyTorch adds it, the
    normalised and gated outputs within half-precision rounding of float32 PyTorch, for widths
    that are and are not powers of two."""
    assert worst_error_under_the_interpreter(LAYER_KERNEL_CHECK) < 4e-3

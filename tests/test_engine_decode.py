"""The decode loop's continuous batching and its int8 KV cache, on tiny synthetic weights on the CPU.

Continuous batching must be invisible in the output: a sentence's tokens are the same whether it
runs alone, in one batch with every other, or enters a slot another sentence just left. (The
sampler's distribution: test_engine_sampler.py; the GPU kernels: test_engine_kernels.py.)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from pipeline.engine.sampling import (
    RowSampling,
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
    assert q_bytes < 0.3 * f_bytes  # 1 byte a value + 2 bytes of scale per head-vector, against 4
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

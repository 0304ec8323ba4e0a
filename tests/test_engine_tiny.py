"""The synthesis engine on tiny synthetic weights (noise, not speech), on the CPU.

The anchor: with greedy sampling, the engine's audio tokens are upstream ChatTTS's, sentence by
sentence, whether a sentence runs alone or among others.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from pipeline.engine.weights import build_config
from pipeline.types import SynthesisRequest

TEXTS = ["今天天气很好我们去公园散步", "The quick brown fox jumps over it.", "混合 mixed 文本"]


@pytest.fixture(scope="session")
def engine(tiny_model_dir: Path) -> Engine:
    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


@pytest.fixture(scope="session")
def upstream(tiny_model_dir: Path) -> Any:
    import ChatTTS

    chat = ChatTTS.Chat(logging.getLogger("ChatTTS"))
    chat.config = build_config("tiny")
    paths = {k: os.path.join(tiny_model_dir, v) for k, v in asdict(chat.config.path).items()}
    chat._load(device=torch.device("cpu"), **paths)
    return chat


def request(text: str, voice: str, steps: int, seed: int = 0, **kw: Any) -> SynthesisRequest:
    return SynthesisRequest(text=text, voice=voice, seed=seed, max_new_tokens=steps,
                            min_new_tokens=steps, **kw)


def upstream_greedy_codes(chat: Any, text: str | list[str], voice: str, steps: int) -> list[Any]:
    """Upstream's tokens with sampling made greedy: a vanishing temperature (upstream's own top_K
    keeps at least 3 tokens, so top_K=1 alone is not greedy there)."""
    import ChatTTS

    params = ChatTTS.Chat.InferCodeParams(spk_emb=voice, max_new_token=steps, min_new_token=steps,
                                          top_K=1, temperature=1e-8, show_tqdm=False,
                                          manual_seed=1)
    texts = text if isinstance(text, list) else [text]
    result = next(chat._infer_code(texts, False, chat.device, True, params))
    return result.ids


# ------------------------------------------------------------------------------ anchor
def test_greedy_tokens_equal_upstreams_alone_and_in_a_mixed_batch(engine: Engine,
                                                                  upstream: Any) -> None:
    voice_a, voice_b = engine.sample_voice(1), engine.sample_voice(2)
    voices = [voice_a, voice_b, voice_a]
    steps = [20, 14, 9]
    batch = [request(t, v, n, seed=i, top_k=1)
             for i, (t, v, n) in enumerate(zip(TEXTS, voices, steps))]
    mixed = engine.generate_codes(batch)  # different voices and lengths in one batch
    for row, (text, voice, n) in enumerate(zip(TEXTS, voices, steps)):
        alone = engine.generate_codes([batch[row]])[0]
        expected = upstream_greedy_codes(upstream, text, voice, n)[0]
        assert torch.equal(alone, expected), f"sentence {row} alone differs from upstream"
        assert torch.equal(mixed[row], expected), f"sentence {row} in a batch differs from upstream"
    # Upstream's own batch (one voice, one length): still the same tokens per sentence.
    together = upstream_greedy_codes(upstream, [TEXTS[0], TEXTS[2]], voice_a, 9)
    ours = engine.generate_codes([request(TEXTS[0], voice_a, 9, top_k=1),
                                  request(TEXTS[2], voice_a, 9, top_k=1)])
    assert torch.equal(ours[0], together[0]) and torch.equal(ours[1], together[1])


def test_waveform_equals_upstreams_decoder_on_the_same_hidden_states(engine: Engine,
                                                                    upstream: Any) -> None:
    hidden = torch.randn(23, 64)
    expected = upstream._decode_to_wavs([hidden.clone()], True)[0]
    ours = engine.decode_hiddens([hidden])[0]
    assert ours.shape == expected.shape == ((2 * 23 - 1) * 256,)
    np.testing.assert_allclose(ours, expected, atol=1e-6)


def test_convolutions_and_linears_as_tiled_gemms_give_upstreams_waveforms(
        engine: Engine, upstream: Any, monkeypatch: Any) -> None:
    """On the GPU in half precision the decoder's full convolutions run over all rows as one
    GEMM and every GEMM in fixed tiles of frames (``conv_as_gemm``, ``linear_in_tiles``); that
    path forced on here (tiles small enough to split these rows) must still be upstream's audio,
    for rows of different lengths decoded together."""
    from pipeline.engine import waveform as waveform_module

    waveform = engine._parts.waveform
    monkeypatch.setattr(waveform, "fixed_shapes", True)
    monkeypatch.setattr(waveform_module, "GEMM_TILE", 16)
    hiddens = [torch.randn(n, 64) for n in (23, 9, 40)]
    ours = engine.decode_hiddens(hiddens)
    for hidden, row_audio in zip(hiddens, ours):
        expected = upstream._decode_to_wavs([hidden.clone()], True)[0]
        np.testing.assert_allclose(row_audio, expected, atol=1e-5)


def test_waveforms_launched_from_a_thread_of_their_own_land_on_their_rows(
        engine: Engine, monkeypatch: Any) -> None:
    """On the GPU finished rows are decoded from a launcher thread while the loop goes on
    (``WaveformsAlongside``); forced on here, chunks flushed out of order still give every row
    its own waveform, and a failing decode is raised by ``collect``, not lost in the thread."""
    from pipeline.engine.waveform_overlap import WaveformsAlongside

    waveform = engine._parts.waveform
    monkeypatch.setattr(waveform, "row_steps_per_chunk", 20)  # flushes: 3 submits + collect
    hiddens = [torch.randn(n, 64) for n in (23, 9, 40, 5)]
    expected = waveform.decode(hiddens)
    handed: list[tuple[int, Any]] = []
    with WaveformsAlongside(waveform, 4, engine.clock, in_thread=True,
                            on_ready=lambda row, wave: handed.append((row, wave))) as alongside:
        alongside.submit([2], [hiddens[2]])
        alongside.submit([3, 0], [hiddens[3], hiddens[0]])
        alongside.submit([1], [hiddens[1]])
        got = alongside.collect()
        # the first row at once; then [5] and [9, 23] (23 waited once); nothing left to collect
        assert len(alongside.launched) == 3
    for row_audio, want in zip(got, expected):
        np.testing.assert_allclose(row_audio, want, atol=1e-6)
    assert sorted(row for row, _ in handed) == [0, 1, 2, 3]  # each row handed on once
    assert all(wave is got[row] for row, wave in handed)

    # no CUDA graph may be captured while that thread queues work (it broke captures on the H200)
    from pipeline.engine.step_graphs import CAPTURE_LOCK

    held = []
    decode = waveform.decode_on_device
    monkeypatch.setattr(waveform, "decode_on_device",
                        lambda batch: held.append(CAPTURE_LOCK.locked()) or decode(batch))
    with WaveformsAlongside(waveform, 1, engine.clock, in_thread=True) as alongside:
        alongside.submit([0], [hiddens[2]])
        alongside.collect()
    assert held == [True] and not CAPTURE_LOCK.locked()

    def broken(batch: Any) -> Any:
        raise RuntimeError("decoder broke")

    monkeypatch.setattr(waveform, "decode_on_device", broken)
    with WaveformsAlongside(waveform, 1, engine.clock, in_thread=True) as alongside:
        alongside.submit([0], [hiddens[2]])
        with pytest.raises(RuntimeError, match="decoder broke"):
            alongside.collect()


# ------------------------------------------------------------------------------ per row
def test_a_sentence_sounds_the_same_alone_in_a_batch_and_at_any_position(engine: Engine) -> None:
    voice = engine.sample_voice(5)
    batch = [request(t, voice, 12 + 3 * i, seed=100 + i) for i, t in enumerate(TEXTS)]
    together = engine.synthesize(batch)
    reversed_order = engine.synthesize(batch[::-1])[::-1]
    for row, req in enumerate(batch):
        alone = engine.synthesize([req])[0]
        np.testing.assert_allclose(together[row].waveform, alone.waveform, atol=1e-5)
        np.testing.assert_allclose(reversed_order[row].waveform, alone.waveform, atol=1e-5)
    codes = engine.generate_codes(batch)
    assert all(torch.equal(a, b) for a, b in zip(codes, engine.generate_codes(batch[::-1])[::-1]))


def test_a_stream_of_batches_sounds_as_each_batch_alone_and_hands_every_sentence_over(
        engine: Engine) -> None:
    """Batches fed one after another into the same slots (a worker's stream): every sentence gets
    the audio it gets in a batch of its own, numbered in arrival order; a batch with another
    sampling mode (greedy) runs in a loop of its own and the stream goes on after it."""
    voice = engine.sample_voice(5)
    batches = [[request(t, voice, 9 + 5 * i + j, seed=10 * i + j) for j, t in enumerate(TEXTS)]
               for i in range(3)]
    batches.insert(2, [request(TEXTS[0], voice, 11, seed=77, top_k=1)])
    batches.append([request(TEXTS[1], voice, 40, seed=99)])  # longer than the slots' first shape
    later = iter(batches[1:])
    asked: list[int] = []

    def more() -> list[SynthesisRequest] | None:
        asked.append(1)
        return next(later, None)

    got: dict[int, Any] = {}
    spoken = engine.synthesize_stream(batches[0], more, lambda index, result: got.setdefault(index, result))
    everyone = [r for batch in batches for r in batch]
    assert spoken == len(everyone) and sorted(got) == list(range(len(everyone)))
    alone = [res for batch in batches for res in engine.synthesize(batch)]
    for index, (req, res) in enumerate(zip(everyone, alone)):
        assert got[index].gpt_steps == res.gpt_steps == req.max_new_tokens and got[index].hit_limit
        np.testing.assert_allclose(got[index].waveform, res.waveform, atol=1e-5)
    assert len(asked) == len(batches)  # and once more, to learn that nothing was left


def test_a_stream_claims_its_next_batch_at_the_first_free_slot_only_while_the_queue_is_deep() -> None:
    """With the queue deep, the next batch is fetched as soon as one slot is free (a batch's rows
    end together, and a slow claim would leave the slots idle); near its end, only once an
    admission's worth of slots is free (an early claim could wait here while another worker idles)."""
    from pipeline.engine.streaming import RequestStream
    from pipeline.scheduling import SchedulingPolicy

    def first_free_slot_fetches(deep: bool) -> bool:
        asked: list[int] = []
        stream = RequestStream(None, lambda: asked.append(1), 1024, [], 0,  # type: ignore[arg-type]
                               fetch_early=lambda: deep)
        stream.poll(1, lambda group: True)
        stream.close()
        return bool(asked)

    assert first_free_slot_fetches(deep=True)
    assert not first_free_slot_fetches(deep=False)
    asked: list[int] = []
    stream = RequestStream(None, lambda: asked.append(1), 1024, [], 0)  # type: ignore[arg-type]
    stream.poll(SchedulingPolicy().admit_at(1024), lambda group: True)
    stream.close()
    assert asked  # an admission's worth free: fetched either way


def test_the_seed_and_the_voice_change_the_audio(engine: Engine) -> None:
    voice = engine.sample_voice(5)
    base = engine.generate_codes([request(TEXTS[0], voice, 16, seed=1)])[0]
    assert not torch.equal(base, engine.generate_codes([request(TEXTS[0], voice, 16, seed=2)])[0])
    # Tiny random weights barely react to the (unit-norm) speaker vector, so compare the audio.
    voices = (voice, engine.sample_voice(6))
    a, b = engine.synthesize([request(TEXTS[0], v, 16, top_k=1) for v in voices])
    assert np.abs(a.waveform - b.waveform).max() > 1e-4


def test_every_row_gets_its_own_length_and_an_unstripped_waveform(engine: Engine) -> None:
    voice = engine.sample_voice(0)
    batch = [request(TEXTS[0], voice, 7), request(TEXTS[1], voice, 19), request(TEXTS[2], voice, 1)]
    results = engine.synthesize(batch)
    for req, res in zip(batch, results):
        assert res.gpt_steps == req.max_new_tokens and res.hit_limit
        assert res.waveform.dtype == np.float32
        assert res.waveform.shape == ((2 * req.max_new_tokens - 1) * 256,)
        assert np.isfinite(res.waveform).all()


def test_eos_ends_a_row_at_its_own_floor_and_is_not_counted(engine: Engine) -> None:
    from pipeline.engine.generation import RowLimits, TokenSpace, generate
    from pipeline.engine.prompts import code_prompt_row, code_prompt_text, embed_prompts
    from pipeline.engine.sampling import RowSampling
    from pipeline.engine.voices import parse_voice

    parts = engine._parts
    emb = parts.embeddings
    eos = emb.vocab - 1

    def eos_loving_logits(hidden: torch.Tensor) -> torch.Tensor:
        logits = emb.code_logits(hidden)
        logits[:, :, eos] = 1e4  # the model always wants to stop
        return logits

    space = TokenSpace(codebooks=emb.codebooks, vocab=emb.vocab, eos=eos, embed=emb.code_embed,
                       logits=eos_loving_logits)
    voice = parse_voice(engine.sample_voice(0), parts.gpt.hidden, emb.codebooks)
    token_ids = engine._tokenize([code_prompt_text(t, "[speed_5]", voice) for t in TEXTS])
    rows = [code_prompt_row(ids, voice) for ids in token_ids]
    prompts = embed_prompts(rows, emb, engine._spk_emb_id, torch.device("cpu"))
    sampling = RowSampling.build([0.3] * 3, [0.7] * 3, [20] * 3, [1.05] * 3, [1, 2, 3],
                                 torch.device("cpu"))
    with torch.inference_mode():
        limits = RowLimits(min_new=[0, 5, 11], max_new=[30, 30, 9])
        out = generate(parts.gpt, space, prompts, limits, sampling, check_every=4)
    assert [t.shape[0] for t in out.tokens] == [0, 5, 9]
    assert out.hit_limit == [False, False, True]
    assert all((t != eos).all() for t in out.tokens)


def test_invalid_requests_are_refused_with_the_reason(engine: Engine) -> None:
    voice = engine.sample_voice(0)
    with pytest.raises(ValueError, match="min_new_tokens"):
        engine.synthesize([SynthesisRequest(text="x", voice=voice, seed=0, max_new_tokens=5,
                                            min_new_tokens=9)])
    with pytest.raises(ValueError, match="top_k"):
        engine.synthesize([replace(request("x", voice, 5), top_k=0)])
    assert engine.synthesize([]) == []

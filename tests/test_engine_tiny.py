"""The synthesis engine on tiny synthetic weights (noise, not speech), on the CPU.

The anchor: with greedy sampling, the engine's audio tokens are upstream ChatTTS's, sentence by
sentence, whether a sentence runs alone or among others.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import wave
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from pipeline.engine.oom import synthesize_fitting
from pipeline.engine.weights import NOISE_WARNING, build_config
from pipeline.errors import ModelError, OutOfDeviceMemory, VoiceError
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
    monkeypatch.setattr(waveform, "row_steps_per_chunk", 20)  # flushes: 2 submits + collect
    hiddens = [torch.randn(n, 64) for n in (23, 9, 40, 5)]
    expected = waveform.decode(hiddens)
    handed: list[tuple[int, Any]] = []
    with WaveformsAlongside(waveform, 4, engine.clock, in_thread=True,
                            on_ready=lambda row, wave: handed.append((row, wave))) as alongside:
        alongside.submit([2], [hiddens[2]])
        alongside.submit([3, 0], [hiddens[3], hiddens[0]])
        alongside.submit([1], [hiddens[1]])
        got = alongside.collect()
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


# ------------------------------------------------------------------------------ voices
def test_sampled_voices_are_deterministic_and_distinct(engine: Engine) -> None:
    from pipeline.engine.voices import SpeakerEmbedding, parse_voice

    assert engine.sample_voice(11) == engine.sample_voice(11)
    assert engine.sample_voice(11) != engine.sample_voice(12)
    parsed = parse_voice(engine.sample_voice(11), 64, 4)
    assert isinstance(parsed, SpeakerEmbedding) and parsed.vector.shape == (64,)


def test_a_bad_voice_string_fails_that_request_with_voice_error(engine: Engine) -> None:
    with pytest.raises(VoiceError):
        engine.synthesize([request("hello", "not a voice at all", 5)])
    with pytest.raises(VoiceError):
        engine.synthesize([request("hello", "", 5)])


def write_wav(path: Path, samples: np.ndarray, rate: int = 16_000) -> Path:
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def test_a_voice_from_a_recording_reads_sentences(engine: Engine, tmp_path: Path) -> None:
    from pipeline.engine.voices import AudioPrompt, parse_voice

    t = np.arange(2 * 16_000) / 16_000
    clip = write_wav(tmp_path / "reader.wav", 0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(3 * t))
    voice = engine.voice_from_audio(clip)
    assert isinstance(parse_voice(voice, 64, 4), AudioPrompt)
    assert voice == engine.voice_from_audio(clip)
    sampled = engine.sample_voice(3)
    results = engine.synthesize([request(TEXTS[0], voice, 8), request(TEXTS[1], sampled, 8)])
    assert [r.gpt_steps for r in results] == [8, 8]
    alone = engine.synthesize([request(TEXTS[0], voice, 8)])[0]
    np.testing.assert_allclose(alone.waveform, results[0].waveform, atol=1e-5)


@pytest.mark.parametrize("content", ["missing", "garbage", "short", "silent"])
def test_an_unusable_recording_raises_voice_error_naming_the_file(engine: Engine, tmp_path: Path,
                                                                  content: str) -> None:
    path = tmp_path / f"{content}.wav"
    if content == "garbage":
        path.write_bytes(b"this is not audio" * 10)
    elif content == "short":
        write_wav(path, 0.3 * np.ones(1600))
    elif content == "silent":
        write_wav(path, np.zeros(48_000))
    with pytest.raises(VoiceError, match=str(path.name)):
        engine.voice_from_audio(path)


# ------------------------------------------------------------------------------ planning, refine
def test_a_big_batch_is_tokenized_in_threads_with_the_ids_of_one_call(engine: Engine) -> None:
    from pipeline.engine.prompt_tokens import TOKENIZE_CHUNK

    texts = [f"[Stts][spk_emb]Sentence number {i}, 第{i}句。[Ptts]" for i in range(2 * TOKENIZE_CHUNK + 5)]
    fast = engine._parts.tokenizer.backend_tokenizer
    engine.forget_prompts()
    assert engine._tokenize(texts) == [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]


def test_prompt_tokens_and_memory_model_feed_the_planner(engine: Engine) -> None:
    from pipeline.batching import PlanLimits, plan_batches
    from pipeline.types import PlannedSentence

    assert engine.prompt_tokens("你好世界你好世界") > engine.prompt_tokens("你好") > 4
    model = engine.memory_model()
    assert model.fixed_bytes > 0 and model.bytes_per_row_position > 0
    planned = [PlannedSentence(id=i, max_new_tokens=50 + i, prompt_tokens=engine.prompt_tokens(t))
               for i, t in enumerate(TEXTS * 10)]
    cap = model.estimate(8, 120)
    batches = plan_batches(planned, PlanLimits(memory_cap_bytes=cap), model)
    assert len(batches) > 1 and all(b.estimated_bytes <= cap for b in batches)


def test_refine_texts_is_batched_and_independent_of_batch_mates(engine: Engine) -> None:
    from pipeline.engine.refine import RefineParams

    params = RefineParams(max_new_tokens=12)
    both = engine.refine_texts(["你好世界", "hello there"], params)
    assert len(both) == 2 and all(isinstance(t, str) for t in both)
    assert engine.refine_texts(["hello there"], params) == [both[1]]
    assert engine.refine_texts([]) == []


def test_slots_grow_to_hold_long_and_wide_batches_and_are_then_kept(engine: Engine) -> None:
    # A worker's batches alternate between few long sentences and many short ones: after one of
    # each, the slots hold both, so a later batch re-makes neither the slots nor their graphs.
    voice = engine.sample_voice(4)
    long = [request(TEXTS[0], voice, 150, seed=i, top_k=1) for i in range(2)]
    wide = [request(TEXTS[2], voice, 6, seed=i, top_k=1) for i in range(7)]
    engine.release_slots()
    long_first = engine.generate_codes(long)
    engine.generate_codes(wide)
    grown = engine._runner.state
    assert grown is not None
    assert grown.shape.capacity >= 7 and grown.shape.positions >= 150
    long_again = engine.generate_codes(long)
    wide_again = engine.generate_codes(wide)
    assert engine._runner.state is grown
    assert all(torch.equal(a, b) for a, b in zip(long_first, long_again))  # the same tokens in bigger slots
    assert all(torch.equal(a, b) for a, b in zip(engine.generate_codes(wide[:1]), wide_again[:1]))


def test_warm_up_runs(engine: Engine) -> None:
    engine.warm_up()


# ------------------------------------------------------------------------------ precisions
# Tolerances against fp32 on the same weights (tiny widths, CPU). Measured: bf16 0.985 / 4e-3 /
# 41 dB, fp16 1.0 / 6e-4 / 59 dB, int8 1.0 / 3e-4 / decoder unchanged (fp32 on CPU).
TOLERANCES = {"bf16": (0.95, 0.03, 30.0), "fp16": (0.98, 5e-3, 45.0), "int8": (0.97, 0.02, 45.0)}


@pytest.mark.parametrize("precision", sorted(TOLERANCES))
def test_reduced_precisions_stay_close_to_fp32(engine: Engine, tiny_model_dir: Path,
                                               precision: str) -> None:
    from pipeline.bench import fidelity

    voice = engine.sample_voice(4)
    requests = [request(t, voice, 16 + 4 * i, seed=i) for i, t in enumerate(TEXTS)]
    candidate = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu",
                                         precision=precision))
    result = fidelity.compare(engine, candidate, requests)
    min_top1, max_rel, min_snr = TOLERANCES[precision]
    assert result.top1_agreement >= min_top1
    assert result.relative_logit_error <= max_rel
    assert result.snr_db >= min_snr
    outputs = candidate.synthesize(requests[:1])
    assert outputs[0].gpt_steps == 16 and np.isfinite(outputs[0].waveform).all()


# ------------------------------------------------------------------------------ loading
def test_synthetic_weights_are_announced_as_noise(tiny_model_dir: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        loaded = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu"))
    assert loaded.synthetic and NOISE_WARNING in caplog.text
    assert loaded.device == "cpu" and loaded.precision == "fp32"  # auto: fp32 at tiny widths


def test_loading_problems_name_the_fix(tmp_path: Path, tiny_model_dir: Path) -> None:
    with pytest.raises(ModelError, match="missing"):
        load_engine(EngineConfig(model_dir=tmp_path))
    with pytest.raises(ModelError, match="unknown precision"):
        load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp8"))
    if not torch.cuda.is_available():
        with pytest.raises(ModelError, match="--device cpu"):
            load_engine(EngineConfig(model_dir=tiny_model_dir, device="cuda"))


def test_int8_on_cuda_without_torchao_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.engine.loading import _quantize_int8

    monkeypatch.setitem(sys.modules, "torchao", None)
    monkeypatch.setitem(sys.modules, "torchao.quantization", None)
    with pytest.raises(ModelError, match="pip install torchao"):
        _quantize_int8(torch.nn.Module(), on_gpu=True, scheme="weight_only")


def test_importing_the_engine_package_does_not_import_torch() -> None:
    code = "import sys, pipeline.engine; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------ out of memory
class OomAbove:
    """The real engine, but the device runs out of memory on batches larger than ``limit``."""

    def __init__(self, engine: Engine, limit: int) -> None:
        self.engine, self.limit = engine, limit
        self.sizes: list[int] = []

    def synthesize(self, requests: Sequence[SynthesisRequest], on_waveform: Any = None) -> list[Any]:
        self.sizes.append(len(requests))
        if len(requests) > self.limit:
            raise OutOfDeviceMemory("CUDA out of memory (injected)")
        return self.engine.synthesize(requests, on_waveform=on_waveform)


def test_out_of_memory_halves_the_batch_and_the_audio_is_unchanged(engine: Engine) -> None:
    voice = engine.sample_voice(9)
    batch = [request(TEXTS[i % 3], voice, 6 + i, seed=i) for i in range(5)]
    direct = engine.synthesize(batch)
    flaky = OomAbove(engine, limit=2)
    halved, fit = synthesize_fitting(flaky, batch)
    assert flaky.sizes == [5, 3, 2, 1, 2] and fit.learned_rows == 2
    for a, b in zip(direct, halved):
        assert a.gpt_steps == b.gpt_steps
        np.testing.assert_allclose(a.waveform, b.waveform, atol=1e-5)


def test_the_engine_reports_a_real_out_of_memory_as_its_own_error(engine: Engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """torch's error never leaves the engine: callers handle one typed error, and the decode
    slots are already freed for the halved retry."""
    import pipeline.engine.engine as engine_module

    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")

    released: list[bool] = []
    monkeypatch.setattr(engine_module, "generate", no_memory)
    monkeypatch.setattr(engine, "release_slots", lambda: released.append(True))
    voice = engine.sample_voice(9)
    with pytest.raises(OutOfDeviceMemory, match="a batch of 2 ran out of device memory"):
        engine.synthesize([request(TEXTS[0], voice, 6, seed=1), request(TEXTS[1], voice, 6, seed=2)])
    assert released == [True]

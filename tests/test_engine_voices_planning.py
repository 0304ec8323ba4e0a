"""The synthesis engine on tiny synthetic weights (noise, not speech), on the CPU: its voices,
what it tells the planner, the refine pass, reduced precisions, loading, and out of memory.
(tests/test_engine_tiny.py holds the anchor against upstream and what each row gets.)"""

from __future__ import annotations

import logging
import subprocess
import sys
import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from pipeline.engine.oom import synthesize_fitting
from pipeline.engine.weights import NOISE_WARNING
from pipeline.errors import ModelError, OutOfDeviceMemory, VoiceError
from pipeline.types import SynthesisRequest
from tests.test_engine_tiny import TEXTS, engine, request  # noqa: F401 - the session's engine fixture


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

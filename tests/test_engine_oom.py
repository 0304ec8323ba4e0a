"""Out-of-memory halving at the engine boundary, with a fake engine (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import synthesize_with_oom_halving
from pipeline.errors import SentenceTooLargeError, SynthesisError
from pipeline.types import SynthesisRequest, SynthesisResult


class FakeEngine:
    """Audio that depends only on the request (as the real engine's does); CUDA runs out of
    memory on batches larger than ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls: list[int] = []

    def synthesize(self, requests: list[SynthesisRequest]) -> list[SynthesisResult]:
        self.calls.append(len(requests))
        if len(requests) > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [SynthesisResult(waveform=np.full(r.max_new_tokens, r.seed, np.float32),
                                gpt_steps=r.max_new_tokens, hit_limit=True) for r in requests]


def batch(n: int) -> list[SynthesisRequest]:
    return [SynthesisRequest(text=f"sentence {i}", voice="v", seed=i, max_new_tokens=10 + i)
            for i in range(n)]


def test_a_batch_that_fits_runs_once() -> None:
    engine = FakeEngine(limit=8)
    out = synthesize_with_oom_halving(engine, batch(8))
    assert engine.calls == [8] and len(out) == 8


def test_out_of_memory_splits_in_halves_until_it_fits_and_keeps_the_order() -> None:
    engine = FakeEngine(limit=3)
    learned: list[int] = []
    out = synthesize_with_oom_halving(engine, batch(13), on_split=learned.append)
    expected = FakeEngine(limit=100).synthesize(batch(13))
    assert [r.gpt_steps for r in out] == [r.gpt_steps for r in expected]
    assert all(np.array_equal(a.waveform, b.waveform) for a, b in zip(out, expected))
    assert learned[0] == 7 and min(learned) <= 3  # the caller learns the limit from on_split
    assert all(size <= 3 for size in engine.calls if size not in (13, 7, 6, 4))


def test_waveforms_handed_on_early_keep_their_index_through_every_split() -> None:
    """``on_waveform`` gets each row under its index in the whole batch, also from the halves
    (a worker writes each sentence's WAV as it comes)."""

    class Streaming(FakeEngine):
        def synthesize(self, requests, on_waveform=None):  # type: ignore[no-untyped-def]
            results = super().synthesize(requests)
            for index, result in enumerate(results):
                on_waveform(index, result.waveform)
            return results

    handed: dict[int, np.ndarray] = {}
    out = synthesize_with_oom_halving(Streaming(limit=3), batch(13),
                                      on_waveform=lambda i, wave: handed.setdefault(i, wave))
    assert sorted(handed) == list(range(13))
    assert all(np.array_equal(handed[i], r.waveform) for i, r in enumerate(out))


def test_a_single_sentence_that_does_not_fit_raises_sentence_too_large() -> None:
    engine = FakeEngine(limit=0)
    with pytest.raises(SentenceTooLargeError, match="sentence 0") as caught:
        synthesize_with_oom_halving(engine, batch(2))
    assert isinstance(caught.value, SynthesisError)
    assert engine.calls == [2, 1]


def test_other_errors_are_not_retried() -> None:
    class Broken(FakeEngine):
        def synthesize(self, requests: list[SynthesisRequest]) -> list[SynthesisResult]:
            self.calls.append(len(requests))
            raise SynthesisError("device fell off the bus")

    engine = Broken(limit=10)
    with pytest.raises(SynthesisError, match="bus"):
        synthesize_with_oom_halving(engine, batch(4))
    assert engine.calls == [4]

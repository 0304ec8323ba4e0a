"""The out-of-memory policy at the engine boundary (pipeline/engine/oom.py), with a fake engine
whose memory holds a given number of rows (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.engine.oom import stream_fitting, synthesize_fitting
from pipeline.errors import OutOfDeviceMemory, SentenceTooLargeError, SynthesisError
from pipeline.types import SynthesisRequest, SynthesisResult


class FakeEngine:
    """Audio that depends only on the request (as the real engine's does); the device runs out of
    memory on batches larger than ``limit`` and on any batch holding a request of ``giant`` tokens."""

    def __init__(self, limit: int, giant: int = 10_000) -> None:
        self.limit, self.giant = limit, giant
        self.calls: list[int] = []

    def synthesize(self, requests, on_waveform=None):  # type: ignore[no-untyped-def]
        self.calls.append(len(requests))
        if len(requests) > self.limit or any(r.max_new_tokens >= self.giant for r in requests):
            raise OutOfDeviceMemory("CUDA out of memory. Tried to allocate 2.00 GiB")
        results = [SynthesisResult(waveform=np.full(r.max_new_tokens, r.seed, np.float32),
                                   gpt_steps=r.max_new_tokens, hit_limit=True) for r in requests]
        for index, result in enumerate(results):
            if on_waveform is not None:
                on_waveform(index, result.waveform)
        return results

    def synthesize_stream(self, requests, more, on_result, fetch_early=None):  # type: ignore[no-untyped-def]
        """A stream that speaks its first request, then runs out of memory admitting ``more()``."""
        on_result(0, self.synthesize(requests[:1])[0])
        more()
        raise OutOfDeviceMemory("CUDA out of memory while admitting the next batch")


def batch(n: int, giant_at: int | None = None) -> list[SynthesisRequest]:
    return [SynthesisRequest(text=f"sentence {i}", voice="v", seed=i,
                             max_new_tokens=10_000 if i == giant_at else 10 + i) for i in range(n)]


def expected(requests: list[SynthesisRequest]) -> list[np.ndarray]:
    return [np.full(r.max_new_tokens, r.seed, np.float32) for r in requests]


def test_a_batch_that_fits_runs_once_and_teaches_nothing() -> None:
    engine = FakeEngine(limit=8)
    outcomes, fit = synthesize_fitting(engine, batch(8))
    assert engine.calls == [8] and len(outcomes) == 8 and fit.learned_rows is None


def test_out_of_memory_halves_until_it_fits_keeps_the_order_and_learns_the_size_that_ran() -> None:
    engine = FakeEngine(limit=3)
    requests = batch(13)
    outcomes, fit = synthesize_fitting(engine, requests)
    assert all(np.array_equal(o.waveform, e) for o, e in zip(outcomes, expected(requests), strict=True))
    assert engine.calls[:3] == [13, 7, 4] and max(c for c in engine.calls if c <= 3) == 3
    assert fit.learned_rows == 3  # the largest batch that ran: the device's real limit


def test_waveforms_handed_on_early_keep_their_index_through_every_split() -> None:
    """``on_waveform`` gets each row under its index in the whole batch, also from the halves
    (a worker writes each sentence's WAV as it comes)."""
    handed: dict[int, np.ndarray] = {}
    requests = batch(13)
    synthesize_fitting(FakeEngine(limit=3), requests, on_waveform=lambda i, wave: handed.setdefault(i, wave))
    assert sorted(handed) == list(range(13))
    assert all(np.array_equal(handed[i], e) for i, e in enumerate(expected(requests)))


def test_a_sentence_that_does_not_fit_alone_fails_alone_and_teaches_nothing() -> None:
    engine = FakeEngine(limit=8)
    requests = batch(6, giant_at=4)
    outcomes, fit = synthesize_fitting(engine, requests)
    assert isinstance(outcomes[4], SentenceTooLargeError) and isinstance(outcomes[4], SynthesisError)
    assert "sentence 4" in str(outcomes[4]) and "even alone" in str(outcomes[4])
    others = [o for i, o in enumerate(outcomes) if i != 4]
    assert all(np.array_equal(o.waveform, e) for o, e in zip(others, expected(requests[:4] + requests[5:])))
    assert fit.isolated == 1 and fit.learned_rows is None  # the sentence was the problem, not the size


def test_a_batch_too_large_with_a_sentence_too_large_learns_from_its_other_half() -> None:
    engine = FakeEngine(limit=2)
    outcomes, fit = synthesize_fitting(engine, batch(8, giant_at=7))
    assert [isinstance(o, SentenceTooLargeError) for o in outcomes] == [False] * 7 + [True]
    assert fit.learned_rows == 2


def test_other_errors_are_not_retried() -> None:
    class Broken(FakeEngine):
        def synthesize(self, requests, on_waveform=None):  # type: ignore[no-untyped-def]
            self.calls.append(len(requests))
            raise SynthesisError("device fell off the bus")

    engine = Broken(limit=10)
    with pytest.raises(SynthesisError, match="bus"):
        synthesize_fitting(engine, batch(4))
    assert engine.calls == [4]


def test_a_stream_that_runs_out_speaks_what_it_took_and_did_not_finish_with_halving() -> None:
    engine = FakeEngine(limit=2)
    first, later = batch(3), batch(6)[3:]
    handed: dict[int, object] = {}
    calls = iter([later])

    fit = stream_fitting(engine, first, lambda: next(calls, None), handed.__setitem__)

    assert sorted(handed) == list(range(6))  # numbered as the engine numbers a stream's requests
    assert all(np.array_equal(handed[i].waveform, e) for i, e in enumerate(expected(first + later)))
    assert engine.calls[1:] == [5, 3, 2, 1, 2]  # the five it had not finished, halved
    assert fit.learned_rows == 2

"""After an out-of-memory error the engine gives back what it holds and the policy uses what it
learned at once (pipeline/engine/oom.py, step_graphs.py, memory.py), checked on CPU with stubs
where a GPU would be."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from pipeline.engine.oom import MemoryFit, synthesize_fitting
from pipeline.errors import OutOfDeviceMemory, SentenceTooLargeError
from pipeline.types import SynthesisRequest, SynthesisResult


class DeviceOfRows:
    """A device that holds ``limit`` rows while everything is released, and ``held`` rows fewer
    (memory still reserved) after a failure until ``release_device_memory`` is called."""

    def __init__(self, limit: int, held: int = 0) -> None:
        self.limit, self.held = limit, held
        self.reserved = False
        self.calls: list[int] = []
        self.releases = 0

    def synthesize(self, requests, on_waveform=None):  # type: ignore[no-untyped-def]
        self.calls.append(len(requests))
        if len(requests) > self.limit - (self.held if self.reserved else 0):
            self.reserved = True
            raise OutOfDeviceMemory(f"{len(requests)} rows do not fit")
        return [SynthesisResult(waveform=np.full(3, r.seed, np.float32), gpt_steps=3, hit_limit=True)
                for r in requests]

    def release_device_memory(self) -> None:
        self.releases += 1
        self.reserved = False


def batch(n: int) -> list[SynthesisRequest]:
    return [SynthesisRequest(text=f"s{i}", voice="v", seed=i, max_new_tokens=3) for i in range(n)]


def test_a_half_as_large_as_one_that_ran_out_is_cut_at_once_not_tried() -> None:
    """96 rows on a device of 24: 96 and the first 48 run out; the second 48 goes straight in
    pieces of 24 (the old policy tried it whole and failed a third time)."""
    device = DeviceOfRows(limit=24)
    outcomes, fit = synthesize_fitting(device, batch(96))
    assert device.calls == [96, 48, 24, 24, 24, 24]
    assert [o.waveform[0] for o in outcomes] == list(range(96))  # every row, in order
    assert fit.failures == 2 and fit.learned_rows == 24 and fit.too_many == 48


def test_the_lesson_carries_to_the_next_batch_without_another_failure() -> None:
    device = DeviceOfRows(limit=24)
    _, fit = synthesize_fitting(device, batch(96))
    device.calls.clear()
    outcomes, same = synthesize_fitting(device, batch(100), fit=fit)
    assert same is fit and fit.failures == 2  # no new failure
    assert device.calls == [20] * 5 and len(outcomes) == 100
    # a size between the largest that ran (24) and the smallest that failed (48) is still tried
    between, _ = synthesize_fitting(device, batch(30), fit=fit)
    assert device.calls[5:] == [30, 15, 15] and len(between) == 30 and fit.too_many == 30


def test_memory_is_released_before_every_retry_so_halving_reaches_a_size_that_fits() -> None:
    """A device that keeps memory reserved after a failure fits 16 rows until it is released:
    released before each retry, the halves find the whole 24 rows again, and no row fails."""
    device = DeviceOfRows(limit=24, held=16)
    outcomes, fit = synthesize_fitting(device, batch(48))
    assert device.releases == fit.failures == 1
    assert not any(isinstance(o, SentenceTooLargeError) for o in outcomes)
    assert device.calls == [48, 24, 24]


def test_without_release_the_reserved_memory_is_what_ends_in_single_rows() -> None:
    """The failure the release prevents: the same device with nothing to release."""

    class NoRelease(DeviceOfRows):
        release_device_memory = None  # type: ignore[assignment]

    device = NoRelease(limit=4, held=4)
    outcomes, fit = synthesize_fitting(device, batch(8))
    assert fit.isolated == 8 and all(isinstance(o, SentenceTooLargeError) for o in outcomes)


def test_a_failed_capture_for_lack_of_memory_raises_and_keeps_graphs_on(monkeypatch) -> None:
    """Out of memory while capturing a step's CUDA graph is the batch's size, not an op that
    cannot be captured: it reaches the policy (which halves) and the graphs stay on."""
    from pipeline.engine import step_graphs
    from pipeline.engine.decode_step import StepKind

    class FakeGraph:
        def replay(self) -> None:
            raise AssertionError("never stored")

    @contextlib.contextmanager
    def capture_out_of_memory(graph, pool=None, stream=None, capture_error_mode=None):  # type: ignore[no-untyped-def]
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB")
        yield

    monkeypatch.setattr(step_graphs, "decode_step", lambda *args: None)
    monkeypatch.setattr(step_graphs, "URGENT_STEPS", False)  # PyTorch's own capture stream: no GPU here
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: (0, 1))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", capture_out_of_memory)
    runner = step_graphs.StepRunner(gpt=None, space=None, use_graphs=True)  # type: ignore[arg-type]
    runner.state = object()  # type: ignore[assignment]
    with pytest.raises(torch.OutOfMemoryError):
        runner.step(StepKind(rows=8, attend=64, greedy=False, penalised=True))
    assert runner.use_graphs and not runner._graphs


def test_releasing_cached_memory_is_harmless_where_there_is_no_gpu() -> None:
    from pipeline.engine.memory import release_cached_memory

    release_cached_memory(torch.device("cpu"))


def test_a_stream_is_made_once_per_purpose_device_and_priority(monkeypatch) -> None:
    """Each batch's Decoder + Vocos run on the same side stream: a new stream per batch cycles
    through PyTorch's pool, each with a cuBLAS workspace and cached blocks of its own. The urgent
    steps' stream is a stream of its own, kept the same way."""
    from pipeline.engine import streams, waveform_overlap

    made: list[tuple[int, int]] = []
    monkeypatch.setattr(streams, "_kept", {})
    monkeypatch.setattr(torch.cuda, "Stream", lambda index, priority=0: made.append((index, priority)) or object())
    first = waveform_overlap.side_stream(torch.device("cuda", 0))
    again = waveform_overlap.side_stream(torch.device("cuda", 0))
    other = waveform_overlap.side_stream(torch.device("cuda", 1))
    urgent = streams.kept_stream("urgent steps", torch.device("cuda", 0), streams.HIGHEST)
    urgent_again = streams.kept_stream("urgent steps", torch.device("cuda", 0), streams.HIGHEST)
    assert first is again and other is not first and urgent is not first and urgent is urgent_again
    assert made == [(0, 0), (1, 0), (0, streams.HIGHEST)]


def test_a_fit_with_nothing_learned_tries_every_batch_whole() -> None:
    assert MemoryFit().piece_rows(10_000) is None
    assert MemoryFit(largest_ran=24, too_many=48).piece_rows(47) is None
    assert MemoryFit(largest_ran=24, too_many=48).piece_rows(48) == 24
    assert MemoryFit(largest_ran=60, too_many=48).piece_rows(100) == 47  # never a size that failed

"""Decoder + Vocos chunks as the GPU's graphs run them: padded to a bucket of steps and a power
of two of rows. The capture itself needs CUDA (tests/gpu, ``python -m pipeline.bench
graph-check``); here the chunks run eagerly at exactly the shapes the graphs would have, so that
every row must come out as it does alone, whatever its batch-mates and padding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine import waveform as waveform_module
from pipeline.engine.waveform_graphs import STEP_BUCKETS, WaveformGraphs, bucket_steps


@pytest.fixture(scope="module")
def waveform(tiny_model_dir: Path) -> Any:
    engine = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))
    return engine._parts.waveform


def test_chunks_run_at_graph_shapes_give_each_row_its_own_waveform(waveform: Any, monkeypatch: Any) -> None:
    shapes: list[tuple[int, int, int]] = []  # (rows, steps, rows with frames)
    graphs = WaveformGraphs(waveform.decode_padded, row_steps_per_chunk=512, hop=waveform.hop)

    def as_a_graph_would(x: Any, frames: Any) -> Any:
        shapes.append((x.shape[0], x.shape[1], int(frames.count_nonzero())))
        return waveform.decode_padded(x, frames)

    monkeypatch.setattr(graphs, "run", as_a_graph_would)
    monkeypatch.setattr(graphs, "wanted", lambda device: True)
    monkeypatch.setattr(waveform, "graphs", graphs)
    monkeypatch.setattr(waveform, "fixed_shapes", True)
    monkeypatch.setattr(waveform, "row_steps_per_chunk", 512)
    monkeypatch.setattr(waveform_module, "GEMM_TILE", 64)
    monkeypatch.setattr(waveform_module, "FFT_TILE", 128)
    lengths = [23, 9, 40, 5, 61, 33, 17, 2, 70, 44, 12]
    hiddens = [torch.randn(n, 64) for n in lengths]

    together = waveform.decode(hiddens)

    monkeypatch.setattr(waveform, "fixed_shapes", False)
    for hidden, got in zip(hiddens, together):
        alone = waveform.decode([hidden])[0]
        assert got.shape == alone.shape == ((2 * hidden.shape[0] - 1) * waveform.hop,)
        np.testing.assert_allclose(got, alone, atol=1e-5)
    # every chunk at a bucket's steps, its rows the next power of two within the chunk budget;
    # together they hold every row once
    assert all(steps in STEP_BUCKETS and rows == min(1 << (real - 1).bit_length(), 512 // steps)
               for rows, steps, real in shapes)
    assert sum(real for _, _, real in shapes) == len(lengths)
    assert any(rows > real for rows, _, real in shapes)  # padding rows ran beside real ones


def test_step_buckets_pad_by_a_quarter_or_less_than_32_steps() -> None:
    assert [bucket_steps(n) for n in (1, 32, 33, 100, 129, 1025, 4096)] == [32, 32, 64, 128, 160, 1280, 4096]
    assert bucket_steps(4097) == 0  # no graph: such a chunk runs eagerly
    assert all(bucket_steps(n) <= max(1.25 * n, n + 31) for n in range(1, 4097))


def test_graph_shapes_stay_within_the_chunk_budget() -> None:
    graphs = WaveformGraphs(lambda x, frames: x, row_steps_per_chunk=16384, hop=256)

    assert graphs.padded_rows(1, 512) == 1
    assert graphs.padded_rows(5, 512) == 8
    assert graphs.padded_rows(30, 512) == 32
    assert graphs.padded_rows(20, 640) == 25  # 32 rows of 640 steps would pass the budget
    assert graphs.padded_steps(16384) == 0  # past the buckets: eager
    assert graphs.padded_steps(300) == 320


def test_the_first_rows_finished_are_decoded_at_once_the_rest_by_the_chunk(waveform: Any,
                                                                          monkeypatch: Any) -> None:
    """A stream's first sentence is heard as soon as it is spoken: its rows are not held back
    until a chunk's worth of rows has finished. The rest go by whole chunks: a row that would
    leave its chunk part-filled (run at the chunk's padded shape all the same) waits for more."""
    from pipeline.engine.timing import PhaseClock
    from pipeline.engine.waveform_overlap import WaveformsAlongside

    monkeypatch.setattr(waveform, "row_steps_per_chunk", 100)
    hiddens = [torch.randn(n, 64) for n in (7, 30, 30, 50, 9)]
    handed: list[int] = []
    with WaveformsAlongside(waveform, None, PhaseClock(waveform.device), in_thread=False,
                            on_ready=lambda row, wave: handed.append(row)) as alongside:
        alongside.submit([0], [hiddens[0]])
        first = list(handed)
        alongside.submit([1, 2], [hiddens[1], hiddens[2]])
        held = list(handed)
        alongside.submit([3], [hiddens[3]])  # 110 steps buffered: a chunk's worth
        filled = list(handed)
        alongside.submit([4], [hiddens[4]])  # 59 steps buffered: waiting for more
        before_the_end = list(handed)
        alongside.collect()

    assert first == [0]  # alone, at once
    assert held == [0]  # 60 steps: waiting for more
    # 30 + 30 fill a chunk of 100 (a third row would pad it to 3 x 50); the 50-step row waits
    assert sorted(filled) == sorted(before_the_end) == [0, 1, 2]
    assert sorted(handed) == [0, 1, 2, 3, 4]


def test_graphs_given_back_for_an_out_of_memory_retry_are_not_captured_again() -> None:
    graphs = WaveformGraphs(lambda x, frames: x, row_steps_per_chunk=16384, hop=256)

    graphs.release()  # to measure memory, say: graphs come back at the next chunk
    assert graphs.enabled
    graphs.release(for_good=True)  # a device that ran out of memory: eager from now on
    assert not graphs.enabled and not graphs.wanted(torch.device("cuda"))


class _RecordedCall:
    """What a CUDA graph is to the code that replays it: the recorded call, over the very tensors
    it was recorded with (not the ones the caller holds at replay)."""

    def __init__(self, body: Any) -> None:
        self.replay = body


def test_a_replayed_chunk_reads_the_input_it_was_given_whatever_its_dtype(monkeypatch: Any) -> None:
    """The benchmark decodes float32 hidden states after the GPT's fp16 ones: a chunk shape
    captured over the fp16 input buffer must not be replayed over a new float32 one (on an H100
    that gave waveforms at -2.5 dB SNR: noise)."""
    def decode_padded(x: Any, frames: Any) -> Any:  # [R, S, C] -> [R, (2S - 1) * hop]
        return x.float().sum(-1).repeat_interleave(2, 1)[:, :-1].repeat_interleave(4, 1)

    graphs = WaveformGraphs(decode_padded, row_steps_per_chunk=256, hop=4)

    def first_of_shape(x: Any, frames: Any) -> Any:  # the eager run and its capture, no streams
        audio = graphs.decode_padded(x, frames)
        graphs._capture(x)
        return audio

    monkeypatch.setattr(graphs, "_first_of_shape", first_of_shape)
    monkeypatch.setattr(graphs, "capture", lambda shape, device, body: graphs._graphs.__setitem__(
        shape, _RecordedCall(body)))
    frames = torch.tensor([6, 6])
    for dtype, seed in ((torch.float16, 1), (torch.float16, 2), (torch.float32, 3), (torch.float16, 4)):
        x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(seed)).to(dtype)
        got = graphs.run(x, frames)
        torch.testing.assert_close(got, graphs.decode_padded(x, frames))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_finishing_in_any_order_and_grouping_each_get_their_own_waveform_once(waveform: Any, monkeypatch: Any,
                                                                                   seed: int) -> None:
    """Whole chunks launched, the rest held back once: whatever order and groups the rows finish
    in, each is handed on exactly once with its own waveform, and none waits past two flushes."""
    from pipeline.engine.timing import PhaseClock
    from pipeline.engine.waveform_overlap import WaveformsAlongside

    rng = np.random.default_rng(seed)
    monkeypatch.setattr(waveform, "row_steps_per_chunk", 120)
    lengths = [int(n) for n in rng.integers(2, 70, 24)]
    hiddens = [torch.randn(n, 64) for n in lengths]
    handed: dict[int, Any] = {}
    flushes_waited: dict[int, int] = {}
    with WaveformsAlongside(waveform, None, PhaseClock(waveform.device), in_thread=False,
                            on_ready=lambda row, wave: handed.setdefault(row, wave)) as alongside:
        order, at = list(rng.permutation(len(lengths))), 0
        while at < len(order):
            group = order[at:at + int(rng.integers(1, 5))]
            at += len(group)
            launched = len(handed)
            alongside.submit(group, [hiddens[i] for i in group])
            if len(handed) > launched:  # a flush: count it for every row still waiting
                for row, _ in alongside.buffered:
                    flushes_waited[row] = flushes_waited.get(row, 0) + 1
        alongside.collect()

    assert sorted(handed) == list(range(len(lengths)))
    for row, hidden in enumerate(hiddens):
        np.testing.assert_allclose(handed[row], waveform.decode([hidden])[0], atol=1e-5)
    assert max(flushes_waited.values(), default=0) <= 1


def test_the_host_time_of_new_graph_shapes_is_kept_for_the_device_time_line() -> None:
    """``log_device_time`` says how long the host spent on graphs' first runs and captures (the
    steps' queue runs dry meanwhile); a first run that fails still counts."""
    import time

    import pytest

    from pipeline.engine.graph_recording import GraphSet

    graphs = GraphSet("chunks")
    with graphs.new_shapes.timed():
        time.sleep(0.02)
    with pytest.raises(RuntimeError), graphs.new_shapes.timed():
        time.sleep(0.01)
        raise RuntimeError("not capturable")
    assert graphs.new_shapes.seconds >= 0.03

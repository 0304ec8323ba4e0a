"""On a GPU, Decoder + Vocos chunks replayed from CUDA graphs give the eager chunks' waveforms
(full-size synthetic weights, fp16): the first chunk of a shape (run eagerly, then captured), its
replays, from the waveform launcher's thread beside a stream of its own, and eagerly again once
the engine gave its memory back for an out-of-memory retry (no graph captured from then on)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.bench.graph_check import synthetic_engine
from pipeline.engine.waveform_overlap import WaveformsAlongside

pytestmark = pytest.mark.gpu


def snr_db(got: np.ndarray, want: np.ndarray) -> float:
    noise = float(np.sum((got - want) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(want**2)) / noise)


def test_graphed_chunks_give_the_eager_waveforms(tmp_path: Path) -> None:
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")
    assert gc.get_freeze_count() > 50_000  # what loading made is out of the collector's walks
    waveform = engine._parts.waveform
    generator = torch.Generator().manual_seed(3)
    lengths = [int(n) for n in torch.randint(20, 900, (96,), generator=generator)]
    hiddens = [torch.randn(n, engine._parts.gpt.hidden, generator=generator).half().cuda() * 0.5
               for n in lengths]

    waveform.graphs.enabled = False
    eager = waveform.decode(hiddens)
    waveform.graphs.enabled = True
    first = waveform.decode(hiddens)  # each shape: eager on the capture stream, then captured
    captured = waveform.graphs.captured
    replayed = waveform.decode(hiddens)
    assert captured >= 2 and waveform.graphs.captured == captured  # replays capture nothing
    with WaveformsAlongside(waveform, len(hiddens), engine.clock, in_thread=True) as alongside:
        for row, hidden in enumerate(hiddens):
            alongside.submit([row], [hidden])
        from_thread = alongside.collect()
    engine.release_device_memory()
    before = waveform.graphs.captured
    after_release = waveform.decode(hiddens)

    assert waveform.graphs.captured == before and not waveform.graphs.enabled
    for way in (first, replayed, from_thread, after_release):
        for got, want in zip(way, eager):
            assert got.shape == want.shape
            assert snr_db(got, want) > 80


def test_a_streams_first_finished_row_is_handed_on_before_any_more_finish(tmp_path: Path) -> None:
    """Its WAV is written as soon as it is decoded, not once more rows fill the next chunk."""
    import time

    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")
    hidden = torch.randn(200, engine._parts.gpt.hidden, generator=torch.Generator().manual_seed(5)).half().cuda()
    heard: list[int] = []
    with WaveformsAlongside(engine._parts.waveform, None, engine.clock, on_ready=lambda row, wave: heard.append(row)) \
            as alongside:
        alongside.submit([0], [hidden])
        deadline = time.monotonic() + 10
        while not heard and time.monotonic() < deadline:
            time.sleep(0.01)
        assert heard == [0]  # nothing else was submitted
        alongside.collect()


def test_the_fused_depthwise_convolution_and_layer_norm_give_the_ops_waveforms(tmp_path: Path) -> None:
    """Each ConvNeXt block's depthwise conv + LayerNorm as one kernel (waveform_kernels.py), compiled
    for this GPU: the waveforms of rows of many lengths decoded together as with the PyTorch ops,
    within half precision (the engine bench's fidelity against float32 is 58 dB)."""
    import pipeline.engine.waveform_kernels as waveform_kernels

    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")
    waveform = engine._parts.waveform
    waveform.graphs.enabled = False
    generator = torch.Generator().manual_seed(7)
    lengths = [int(n) for n in torch.randint(5, 700, (48,), generator=generator)]
    hiddens = [torch.randn(n, engine._parts.gpt.hidden, generator=generator).half().cuda() * 0.5
               for n in lengths]
    try:
        waveform_kernels.FUSED = False
        ops = waveform.decode(hiddens)
        waveform_kernels.FUSED = True
        fused = waveform.decode(hiddens)
    finally:
        waveform_kernels.FUSED = True
    for got, want in zip(fused, ops):
        assert got.shape == want.shape
        assert snr_db(got, want) > 50

"""On a GPU, a real CUDA out-of-memory is recovered by halving: under a memory cap between what
stays resident and the whole batch's peak, the batch splits and every sentence comes back with
the same length and the same audio (``python -m pipeline.bench oom`` prints the report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.bench.oom import forced_recovery
from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.weights import write_synthetic_weights

pytestmark = pytest.mark.gpu


def test_a_batch_over_the_memory_cap_splits_and_every_sentence_comes_back_the_same(tmp_path: Path) -> None:
    import torch

    model = write_synthetic_weights(tmp_path, "full").root
    engine = load_engine(EngineConfig(model_dir=model, device="cuda", precision="fp16"))
    engine.warm_up()
    try:
        report = forced_recovery(engine, rows=96, steps=300)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)  # the rest of the session keeps the card

    assert report["learned_rows"] is not None and report["learned_rows"] < 96, report
    assert report["sentences_back"] == 96 and report["too_large_alone"] == 0, report
    assert report["same_lengths"] and report["identical"], report

"""On a GPU, a run's start takes the memory model an earlier run calibrated on the same device
and model (``Engine.warm_up(calibration_file)``) instead of measuring it again, and a capped
engine keeps a model of its own."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.weights import write_synthetic_weights

pytestmark = pytest.mark.gpu


def test_the_second_start_takes_the_first_ones_calibration(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    model = write_synthetic_weights(tmp_path / "weights", "full").root
    kept = tmp_path / "cache" / "memory_models.json"
    first = load_engine(EngineConfig(model_dir=model, device="cuda", precision="fp16"))
    with caplog.at_level(logging.INFO):
        first.warm_up(kept)
    assert "memory model calibrated on" in caplog.text and kept.is_file()
    measured = first.calibrated_memory_model
    del first
    caplog.clear()

    second = load_engine(EngineConfig(model_dir=model, device="cuda", precision="fp16"))
    with caplog.at_level(logging.INFO):
        second.warm_up(kept)

    assert second.calibrated_memory_model == measured
    assert "as calibrated before" in caplog.text and "memory model calibrated on" not in caplog.text

"""A GPU's memory calibration kept between runs (pipeline/engine/calibration_file.py): a run on a
machine that ran once takes the model measured then instead of measuring ~1.5 s again; anything
else (another device, cap, precision, model or software) is calibrated anew. The file is a cache:
a broken or unwritable one costs a calibration, never a run. On the GPU: tests/gpu."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pipeline.batching import MemoryModel
from pipeline.engine.calibration_file import (
    MOST_ENTRIES,
    calibration_key,
    load_calibration,
    save_calibration,
)

H200 = {"device": "NVIDIA H200", "memory": 150_000_000_000, "cap": None, "precision": "fp16",
        "kv_int8": True, "torch": "2.11.0", "shapes": "abc"}
MEASURED = MemoryModel(fixed_bytes=958_428_041, bytes_per_row_position=118_215)


def test_a_model_kept_for_a_device_is_read_back_by_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "memory_models.json"  # its folder does not exist yet
    save_calibration(path, calibration_key(H200), MEASURED)

    assert load_calibration(path, calibration_key(dict(H200))) == MEASURED
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temporary file left


@pytest.mark.parametrize("change", [{"cap": 8 * 2**30}, {"precision": "bf16"}, {"kv_int8": False},
                                    {"device": "NVIDIA H100 80GB HBM3"}, {"torch": "2.12.0"},
                                    {"shapes": "a full model"}])
def test_any_other_device_cap_precision_model_or_software_is_calibrated_anew(tmp_path: Path, change) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "memory_models.json"
    save_calibration(path, calibration_key(H200), MEASURED)

    assert load_calibration(path, calibration_key({**H200, **change})) is None


def test_each_device_keeps_its_own_model_and_the_oldest_go_first(tmp_path: Path) -> None:
    path = tmp_path / "memory_models.json"
    capped = MemoryModel(fixed_bytes=1, bytes_per_row_position=2)
    save_calibration(path, calibration_key(H200), MEASURED)
    save_calibration(path, calibration_key({**H200, "cap": 4 * 2**30}), capped)
    assert load_calibration(path, calibration_key(H200)) == MEASURED
    assert load_calibration(path, calibration_key({**H200, "cap": 4 * 2**30})) == capped

    for cap in range(MOST_ENTRIES):
        save_calibration(path, calibration_key({**H200, "cap": cap}), capped)
    assert load_calibration(path, calibration_key(H200)) is None  # the oldest made room
    assert len(json.loads(path.read_text())) == MOST_ENTRIES


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"%s": {"fixed_bytes": "many"}}',
                                     '{"%s": {"fixed_bytes": -1, "bytes_per_row_position": 5}}'])
def test_a_broken_file_is_calibrated_over(tmp_path: Path, content: str, caplog) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "memory_models.json"
    key = calibration_key(H200)
    path.write_text(content.replace("%s", key))

    assert load_calibration(path, key) is None
    save_calibration(path, key, MEASURED)
    assert load_calibration(path, key) == MEASURED


def test_a_folder_that_cannot_be_written_costs_the_next_run_a_calibration_not_this_one(
        tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cache").write_text("a file where the folder should be")
    path = tmp_path / "cache" / "memory_models.json"
    with caplog.at_level(logging.WARNING):
        save_calibration(path, calibration_key(H200), MEASURED)  # no exception: the run goes on

    assert "the next run measures it again" in caplog.text
    assert load_calibration(path, calibration_key(H200)) is None

"""Memory models calibrated on a device, kept between runs.

Calibrating (``memory.calibrate_memory_model``: a few batches whose peaks are measured) takes
~1.5 s of an H200 run's start, before the first sentence can be planned. What it measures
depends only on the device, its cap, the model's shapes and precision, and the software that
runs them, so a run on a machine that ran once takes the model measured then: one JSON file,
an entry per key (``calibration_key``). Best effort both ways: an unreadable or foreign file is
calibrated over, and a file that cannot be written only costs the next run the same 1.5 s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path

from pipeline.batching import MemoryModel
from pipeline.temp_files import temporary_sibling

log = logging.getLogger(__name__)

# Bump when what calibration measures or how it fits changes (shapes, margins, what a batch
# holds at its peak): old entries are then never read again. 2: a prefill's keys and values go
# into the slots layer by layer and a large admission runs in pieces (its peak is lower). 3: the
# int8 cache's scales in fp16 (a slot position holds 3 % fewer bytes).
CALIBRATION_VERSION = 3
MOST_ENTRIES = 32  # devices, caps and precisions one data directory keeps models for


def calibration_key(facts: dict[str, object]) -> str:
    """A short stable name for what a calibration depends on (``facts``: JSON-able values)."""
    text = json.dumps({"version": CALIBRATION_VERSION, **facts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def load_calibration(path: Path, key: str) -> MemoryModel | None:
    """The model kept under ``key`` in ``path``; None where there is none (or none readable)."""
    entry = _entries(path).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        fixed, slope = int(entry["fixed_bytes"]), int(entry["bytes_per_row_position"])
    except (KeyError, TypeError, ValueError):
        return None
    return MemoryModel(fixed_bytes=fixed, bytes_per_row_position=slope) if fixed > 0 and slope > 0 else None


def save_calibration(path: Path, key: str, model: MemoryModel) -> None:
    """Keep ``model`` under ``key`` in ``path`` (written whole under a temporary name, renamed)."""
    entries = _entries(path)
    entries.pop(key, None)
    entries[key] = {"fixed_bytes": model.fixed_bytes, "bytes_per_row_position": model.bytes_per_row_position}
    kept = dict(list(entries.items())[-MOST_ENTRIES:])  # the newest, in the order they were kept
    partial = temporary_sibling(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(kept, indent=1), encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        log.warning("%s: the memory calibration was not kept (%s); the next run measures it again",
                    path, exc.strerror or exc)


def _entries(path: Path) -> dict[str, object]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); calibrating anew", path, exc)
        return {}
    return entries if isinstance(entries, dict) else {}

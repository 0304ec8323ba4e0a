"""A finished file's way into the output folder: written under a temporary name that names its
writer (``pipeline/temp_files.py``; the same folder, so the rename is atomic), then renamed — a
listener's player or a library scan never meets half a file."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling


def partial_path(final_path: Path) -> Path:
    """The temporary name a file is written under until it is complete."""
    return temporary_sibling(final_path, "partial")


def publish(partial: Path, final_path: Path) -> Path:
    """Atomically give a completed file its final name."""
    try:
        os.replace(partial, final_path)
    except OSError as exc:
        remove_quietly(partial)
        raise AssemblyError(
            f"{final_path}: cannot rename the finished file into place: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    return final_path

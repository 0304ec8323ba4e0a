"""Device failures as the project's errors: out of memory as OutOfDeviceMemory (which ``oom.py``
halves and retries), anything else the device raises as SynthesisError."""

from __future__ import annotations

import torch

from pipeline.errors import OutOfDeviceMemory, SynthesisError, TtsJobsError


class device_errors:  # noqa: N801 - used as ``with device_errors(rows):``
    """Around device work on a batch of ``rows``: its failures turned into the project's errors."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:  # type: ignore[no-untyped-def]
        if exc is None or isinstance(exc, (TtsJobsError, ValueError)):
            return False
        if isinstance(exc, torch.OutOfMemoryError):
            raise OutOfDeviceMemory(f"a batch of {self.rows} ran out of device memory: {exc}") from exc
        if isinstance(exc, RuntimeError):
            raise SynthesisError(f"synthesis of a batch of {self.rows} failed on the device: "
                                 f"{exc}") from exc
        return False

"""A GPU's CUDA context made through the driver itself, on a thread of its own, while torch imports.

Torch makes the context on its first CUDA call, after its own import (1.2-1.9 s on an H200 host),
on the way to the first sentence: 0.34-0.42 s more there. The driver's calls give the interpreter
lock up (ctypes releases it), so made here they run beside the import, and torch's runtime later
finds the device's primary context retained and uses it (0.03 s; docs/benchmarks.md). Nothing is
allocated on the device but the context itself; any failure (no driver, no such device) is left
for torch to find and say.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time

log = logging.getLogger(__name__)

CUDA_SUCCESS = 0


def device_ordinal(device: str) -> int:
    """The driver's ordinal of ``device`` ("cuda:1" -> 1; "cuda" and "auto": torch's default, 0)."""
    _, _, index = device.partition(":")
    return int(index) if index.isdigit() else 0


def open_context_beside(device: str) -> threading.Thread:
    """Start making ``device``'s primary context on a daemon thread; returns the thread."""
    thread = threading.Thread(target=open_primary_context, args=(device_ordinal(device),),
                              name="cuda-context", daemon=True)
    thread.start()
    return thread


def open_primary_context(ordinal: int) -> bool:
    """cuInit and ``ordinal``'s primary context retained (kept for the process, as torch keeps
    it). Returns whether it was made. Modules load lazily, as torch asks (the driver's default
    since CUDA 12.2: ``CUDA_MODULE_LOADING`` unset)."""
    began = time.perf_counter()
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    device, context = ctypes.c_int(), ctypes.c_void_p()
    made = (driver.cuInit(0) == CUDA_SUCCESS
            and driver.cuDeviceGet(ctypes.byref(device), ordinal) == CUDA_SUCCESS
            and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == CUDA_SUCCESS)
    log.debug("CUDA context of device %d %s in %.2f s", ordinal, "made" if made else "not made",
              time.perf_counter() - began)
    return made

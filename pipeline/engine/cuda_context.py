"""A GPU's CUDA context made through the driver itself, on a thread of its own, while torch imports.

Torch makes the context on its first CUDA call, after its own import (1.2-1.9 s on an H200 host),
on the way to the first sentence: 0.34-0.42 s more there. The driver's calls give the interpreter
lock up (ctypes releases it), so made here they run beside the import, and torch's runtime later
finds the device's primary context retained and uses it (0.03 s; docs/benchmarks.md). Nothing is
allocated on the device but the context itself; any failure (no driver, no such device) is left
for torch to find and say.

How the host's threads wait for the GPU is the context's to say, and only before it is made:
``WAIT`` "block" (the default) puts a waiting thread to sleep on the driver's event; "spin" keeps
it spinning a core for the lowest latency (what the driver does by default on a host with more
cores than contexts). Measured on an H200 (the engine bench, 1,024 slots): 2,985 / 3,000x
blocking against 2,967 / 2,971x spinning, and 12 CPU-seconds fewer per run: cores left to the
encodes that assemble the book beside the GPU (a shelf through Celery showed no difference in
its finish in one call: 82.99 against 82.17 s).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time

log = logging.getLogger(__name__)

CUDA_SUCCESS = 0
WAIT_FLAGS = {"block": 0x04, "spin": 0x01}  # CU_CTX_SCHED_BLOCKING_SYNC, CU_CTX_SCHED_SPIN
WAIT = "block"  # how this process's threads wait for its GPUs (EngineTuning.host_wait)


def device_ordinal(device: str) -> int:
    """The driver's ordinal of ``device`` ("cuda:1" -> 1; "cuda" and "auto": torch's default, 0)."""
    _, _, index = device.partition(":")
    return int(index) if index.isdigit() else 0


def open_context_beside(device: str, wait: str) -> threading.Thread:
    """Start making ``device``'s primary context (its threads waiting by ``wait``) on a daemon
    thread; returns the thread."""
    thread = threading.Thread(target=open_primary_context, args=(device_ordinal(device), wait),
                              name="cuda-context", daemon=True)
    thread.start()
    return thread


def open_primary_context(ordinal: int, wait: str | None = None) -> bool:
    """cuInit and ``ordinal``'s primary context retained (kept for the process, as torch keeps
    it), its threads waiting by ``wait`` (default ``WAIT``). Returns whether it was made. Modules
    load lazily, as torch asks (the driver's default since CUDA 12.2: ``CUDA_MODULE_LOADING``
    unset). A context torch made already keeps its flags where the driver refuses new ones."""
    began = time.perf_counter()
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    device, context = ctypes.c_int(), ctypes.c_void_p()
    made = (driver.cuInit(0) == CUDA_SUCCESS
            and driver.cuDeviceGet(ctypes.byref(device), ordinal) == CUDA_SUCCESS)
    flags = WAIT_FLAGS.get(wait or WAIT)  # an unknown name is the engine's load to refuse
    if made and flags is not None and driver.cuDevicePrimaryCtxSetFlags(device, flags) != CUDA_SUCCESS:
        log.debug("CUDA context of device %d: its wait left as it was (made before)", ordinal)
    made = made and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == CUDA_SUCCESS
    log.debug("CUDA context of device %d %s in %.2f s", ordinal, "made" if made else "not made",
              time.perf_counter() - began)
    return made

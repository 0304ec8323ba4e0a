"""Triton, where it is installed: CUDA builds of PyTorch, and Triton's CPU interpreter under
TRITON_INTERPRET=1 (the kernel tests). On CPU builds ``triton`` and ``tl`` are None: the kernel
modules then define no kernels and their callers run the PyTorch ops.

Also the kernels' early launch (``EARLY_LAUNCH``): on Hopper a kernel launched with programmatic
dependent launch may be scheduled as the kernel before it ends, instead of after its completion
reaches the stream; it waits (``griddepcontrol.wait``, ``wait_for_prior``) before it reads
anything that kernel wrote. A decode step runs ~150 kernels back to back, each boundary ~1-2 µs
of an idle SM."""

from __future__ import annotations

from typing import Any

try:  # pragma: no cover - exercised on the GPU machine (and under TRITON_INTERPRET=1)
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of PyTorch
    triton = None
    tl = None

# EngineTuning.early_launch: the decode step's residual + RMSNorm, SiLU x up and word attention
# kernels launched early after the GEMM before each (off until measured on an H200)
EARLY_LAUNCH = False

if triton is not None:  # pragma: no cover - Triton code
    from triton.language.extra.cuda import gdc_wait

    @triton.jit
    def wait_for_prior(WAIT: tl.constexpr):
        """Where this kernel was launched early: wait until the kernel before it has completed and
        its writes are visible (Triton's own ``gdc_wait``; PTX, so not under the interpreter)."""
        if WAIT:
            gdc_wait()


def compiled() -> bool:
    """Whether the kernels are compiled for the GPU (inline PTX and all) rather than run by
    Triton's CPU interpreter (TRITON_INTERPRET=1 makes ``triton.jit`` give an interpreted function)."""
    return isinstance(wait_for_prior, triton.runtime.JITFunction)


def in_flight(stages: int) -> int:
    """Blocks a kernel's loop over a slot's positions keeps in flight: ``stages`` when compiled
    (a pipelined ``tl.range``), 1 under the interpreter (a while loop: it takes no range over a
    loaded bound)."""
    return stages if compiled() else 1


def early_launch() -> dict[str, Any]:
    """The launch options and the ``WAIT`` constant of a kernel that may launch early: early
    only when compiled for a GPU (the CPU interpreter runs no PTX) and ``EARLY_LAUNCH`` is on."""
    return {"launch_pdl": True, "WAIT": True} if EARLY_LAUNCH and compiled() else {"WAIT": False}


__all__ = ["EARLY_LAUNCH", "compiled", "early_launch", "in_flight", "tl", "triton"]

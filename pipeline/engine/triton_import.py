"""Triton, where it is installed: CUDA builds of PyTorch, and Triton's CPU interpreter under
TRITON_INTERPRET=1 (the kernel tests). On CPU builds ``triton`` and ``tl`` are None: the kernel
modules then define no kernels and their callers run the PyTorch ops."""

from __future__ import annotations

try:  # pragma: no cover - exercised on the GPU machine (and under TRITON_INTERPRET=1)
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of PyTorch
    triton = None
    tl = None

if triton is not None:  # pragma: no cover - Triton code
    @triton.jit
    def _probe():
        """Nothing: what ``triton.jit`` makes of it tells a compiled kernel from an interpreted one."""


def compiled() -> bool:
    """Whether the kernels are compiled for the GPU (inline PTX and all) rather than run by
    Triton's CPU interpreter (TRITON_INTERPRET=1 makes ``triton.jit`` give an interpreted function)."""
    return isinstance(_probe, triton.runtime.JITFunction)


def in_flight(stages: int) -> int:
    """Blocks a kernel's loop over a slot's positions keeps in flight: ``stages`` when compiled
    (a pipelined ``tl.range``), 1 under the interpreter (a while loop: it takes no range over a
    loaded bound)."""
    return stages if compiled() else 1


__all__ = ["compiled", "in_flight", "tl", "triton"]

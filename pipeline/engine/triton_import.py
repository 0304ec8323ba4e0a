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

__all__ = ["tl", "triton"]

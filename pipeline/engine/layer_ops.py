"""A Llama layer's small ops in PyTorch: the path off the GPU (and in fp32), and the reference the
Triton kernels of ``layer_kernels.py`` are tested against — residual add + RMSNorm, SiLU × up,
rotary embedding and its tables, and the additive attention mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                  eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The PyTorch path of ``layer_kernels.add_rms_norm``: x + delta, and its RMSNorm."""
    x = x + delta
    return x, F.rms_norm(x, (x.shape[-1],), weight, eps)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """The PyTorch path of ``layer_kernels.silu_mul``."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rope_tables(hf_model: nn.Module, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's own rotary embedding evaluated once for every position, so scaling variants carry over."""
    device = hf_model.norm.weight.device
    ids = torch.arange(positions, device=device).unsqueeze(0)
    probe = torch.zeros(1, 1, dtype=torch.float32, device=device)
    cos, sin = hf_model.rotary_emb(probe, ids)
    return cos[0].float(), sin[0].float()


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where attention is allowed, -inf elsewhere (no host-to-device copy: graph-safe)."""
    zeros = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return zeros.masked_fill_(~allowed, float("-inf"))

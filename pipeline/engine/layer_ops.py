"""A Llama layer's small ops in PyTorch: the path off the GPU (and in fp32), and the reference the
Triton kernels of ``layer_kernels.py`` are tested against — residual add + RMSNorm, SiLU × up,
rotary embedding and its tables, the additive attention mask, and attention by SDPA."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# attend(queries [B, H, L, D], keys, values) -> [B, L, H, D]
Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor | None,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The PyTorch path of ``layer_kernels.add_rms_norm``: x + delta, and its RMSNorm (no weight:
    the norm's weight folded into the projection that reads it, llama_layer.py)."""
    x = x + delta
    return x, F.rms_norm(x, (x.shape[-1],), weight, eps)


def rms_scale(x: torch.Tensor, eps: float) -> torch.Tensor:
    """1 / RMS of each row of x [..., C] in float32, [..., 1]: the reference of the kernels'
    ``attention_block.rms_scale``."""
    return torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)


def silu_mul(gate_up: torch.Tensor, residual: torch.Tensor | None = None, eps: float = 0.0) -> torch.Tensor:
    """The PyTorch path of ``layer_kernels.silu_mul``: silu(gate) * up, both normalised by the
    RMSNorm of the ``residual`` rows first where the projection was of those (raw) rows."""
    if residual is not None:
        gate_up = (gate_up.float() * rms_scale(residual, eps)).to(gate_up.dtype)
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


def masked_attention(attn_mask: torch.Tensor | None) -> Attend:
    """SDPA over [B, H, S, D] keys with an additive mask; returns [B, L, H, D]."""

    def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(query, keys, values, attn_mask=attn_mask)
        return out.transpose(1, 2)

    return attend


def slot_attention(write_at: torch.Tensor, attend: int, dtype: torch.dtype) -> Attend:
    """Attention of one query per slot over its own cache prefix [0, write_at], when the Triton
    path is off (CPU, fp32): SDPA with a length mask over the first ``attend`` positions.
    Keys/values arrive as [B, H, attend, D]."""
    allowed = torch.arange(attend, device=write_at.device) <= write_at.unsqueeze(1)
    mask = additive_mask(allowed, dtype)[:, None, None, :]

    def masked(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=mask).transpose(1, 2)

    return masked

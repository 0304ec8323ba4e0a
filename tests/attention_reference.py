"""Decode attention in plain PyTorch, row by row: what the Triton kernels are checked against."""

from __future__ import annotations

import math

import torch


def reference_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                        used: torch.Tensor) -> torch.Tensor:
    """Attention of queries ``q`` [B, H, D] over the first ``used[b]`` positions of each row's
    ``keys``/``values`` [B, H, P, D], in float32."""
    rows, heads, dim = q.shape
    out = torch.empty(rows, heads, dim)
    for b in range(rows):
        n = int(used[b])
        scores = torch.einsum("hd,hpd->hp", q[b].float(), keys[b, :, :n].float()) / math.sqrt(dim)
        out[b] = torch.einsum("hp,hpd->hd", scores.softmax(-1), values[b, :, :n].float())
    return out

"""The ConvNeXt block that upstream's Decoder and Vocos share (a depthwise convolution, a
LayerNorm, a two-layer MLP and a per-channel scale), holding their tensors under their names."""

from __future__ import annotations

import torch
from torch import nn


class ConvNeXtBlock(nn.Module):
    """Weights only: ``WaveformDecoder`` runs the block over masked batches.

    ``scale_name`` is the layer scale's name in the file: "weight" in upstream's Decoder,
    "gamma" in Vocos.
    """

    def __init__(self, dim: int, intermediate: int, kernel: int, dilation: int,
                 scale_name: str) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=kernel, padding=dilation * (kernel // 2),
                                dilation=dilation, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(intermediate, dim)
        self.register_parameter(scale_name, nn.Parameter(torch.empty(dim)))

"""Vocos (``asset/Vocos.safetensors``): mel frames to a 24 kHz waveform.

The backbone (a convolution, LayerNorm, ConvNeXt blocks, a final LayerNorm) and the inverse-STFT
head's projection and window, under Vocos's own tensor names. Its mel feature extractor (used only
to train and to encode audio) is in the file too and is not read. Widths come from the shapes.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from pipeline.engine.modules.convnext import ConvNeXtBlock
from pipeline.engine.modules.release import VOCOS_HOP
from pipeline.engine.modules.state import build_empty, count_indexed, file_shapes, load_into, shape_of

UNUSED_PREFIX = "feature_extractor."


class Backbone(nn.Module):
    def __init__(self, channels: int, dim: int, intermediate: int, layers: int,
                 kernels: tuple[int, int]) -> None:
        super().__init__()
        stem, block = kernels
        self.embed = nn.Conv1d(channels, dim, kernel_size=stem, padding=stem // 2)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.convnext = nn.ModuleList(ConvNeXtBlock(dim, intermediate, block, 1, "gamma")
                                      for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(dim, eps=1e-6)


class InverseStft(nn.Module):
    def __init__(self, n_fft: int, hop_length: int) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.register_buffer("window", torch.empty(n_fft))


class IstftHead(nn.Module):
    def __init__(self, dim: int, n_fft: int, hop_length: int) -> None:
        super().__init__()
        self.out = nn.Linear(dim, n_fft + 2)
        self.istft = InverseStft(n_fft, hop_length)


class Vocos(nn.Module):
    def __init__(self, backbone: Backbone, head: IstftHead) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head


def load_vocos(path: Path, device: torch.device) -> Vocos:
    shapes = file_shapes(path)
    dim, channels, stem = shape_of(shapes, "backbone.embed.weight", path)
    intermediate = shape_of(shapes, "backbone.convnext.0.pwconv1.weight", path)[0]
    block = shape_of(shapes, "backbone.convnext.0.dwconv.weight", path)[-1]
    layers = count_indexed(shapes, "backbone.convnext.")
    n_fft = shape_of(shapes, "head.istft.window", path)[0]

    def make() -> Vocos:
        return Vocos(Backbone(channels, dim, intermediate, layers, (stem, block)),
                     IstftHead(dim, n_fft, VOCOS_HOP))

    unused = [k for k in shapes if k.startswith(UNUSED_PREFIX)]
    return load_into(build_empty(make), path, device, unused=unused)

"""Upstream's Decoder (``asset/Decoder.safetensors``): GPT hidden states to mel frames.

It is ChatTTS's ``DVAE`` built without encoder and quantiser, so only its decoding path: a
two-convolution stem, ConvNeXt blocks, a 1x1 projection, an output convolution to 100 mel bins
and the per-bin ``coef`` scale. Widths and depth are read from the file's tensor shapes.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from pipeline.engine.modules.convnext import ConvNeXtBlock
from pipeline.engine.modules.release import DECODER_DILATION
from pipeline.engine.modules.state import build_empty, count_indexed, file_shapes, load_into, shape_of

MEL_BINS = 100


class DecoderStack(nn.Module):
    """Upstream's ``DVAEDecoder``."""

    def __init__(self, idim: int, odim: int, hidden: int, bn_dim: int, n_layer: int,
                 kernel: int) -> None:
        super().__init__()
        self.conv_in = nn.Sequential(nn.Conv1d(idim, bn_dim, 3, 1, 1), nn.GELU(),
                                     nn.Conv1d(bn_dim, hidden, 3, 1, 1))
        self.decoder_block = nn.ModuleList(
            ConvNeXtBlock(hidden, hidden * 4, kernel, DECODER_DILATION, "weight")
            for _ in range(n_layer))
        self.conv_out = nn.Conv1d(hidden, odim, kernel_size=1, bias=False)


class MelDecoder(nn.Module):
    """Upstream's ``DVAE`` as the Decoder file holds it: ``coef``, ``decoder``, ``out_conv``."""

    def __init__(self, stack: DecoderStack, dim: int) -> None:
        super().__init__()
        self.register_buffer("coef", torch.empty(1, MEL_BINS, 1))
        self.decoder = stack
        self.out_conv = nn.Conv1d(dim, MEL_BINS, 3, 1, 1, bias=False)


def load_decoder(path: Path, device: torch.device) -> MelDecoder:
    shapes = file_shapes(path)
    bn_dim, idim, _ = shape_of(shapes, "decoder.conv_in.0.weight", path)
    hidden = shape_of(shapes, "decoder.conv_in.2.weight", path)[0]
    odim = shape_of(shapes, "decoder.conv_out.weight", path)[0]
    kernel = shape_of(shapes, "decoder.decoder_block.0.dwconv.weight", path)[-1]
    n_layer = count_indexed(shapes, "decoder.decoder_block.")
    dim = shape_of(shapes, "out_conv.weight", path)[1]

    def make() -> MelDecoder:
        return MelDecoder(DecoderStack(idim, odim, hidden, bn_dim, n_layer, kernel), dim)

    return load_into(build_empty(make), path, device)

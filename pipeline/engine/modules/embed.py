"""Upstream's ``Embed`` (``asset/Embed.safetensors``): text and audio-code tables and heads.

The heads are weight-normalised, stored as a gain (``original0``) and a direction
(``original1``) under the names torch's ``weight_norm`` parametrisation gives them; ``weight``
is derived by the same kernel that parametrisation calls, so the values are upstream's to the bit.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from pipeline.engine.modules.state import build_empty, count_indexed, file_shapes, load_into, shape_of


class _Direction(nn.Module):
    def __init__(self, rows: int, width: int) -> None:
        super().__init__()
        self.original0 = nn.Parameter(torch.empty(rows, 1))  # gain per output row
        self.original1 = nn.Parameter(torch.empty(rows, width))  # direction


class _Parametrizations(nn.Module):
    def __init__(self, rows: int, width: int) -> None:
        super().__init__()
        self.weight = _Direction(rows, width)


class WeightNormHead(nn.Module):
    """A bias-free linear head stored as torch's ``weight_norm`` (dim 0) stores it."""

    def __init__(self, rows: int, width: int) -> None:
        super().__init__()
        self.parametrizations = _Parametrizations(rows, width)

    @property
    def weight(self) -> torch.Tensor:
        p = self.parametrizations.weight
        return torch._weight_norm(p.original1, p.original0, 0)


class Embed(nn.Module):
    """Upstream's ``Embed`` tensors: ``num_vq`` code tables and heads, one text table and head."""

    def __init__(self, hidden: int, num_audio_tokens: int, num_text_tokens: int, num_vq: int) -> None:
        super().__init__()
        self.num_vq = num_vq
        self.num_audio_tokens = num_audio_tokens
        self.emb_code = nn.ModuleList(_table(num_audio_tokens, hidden) for _ in range(num_vq))
        self.emb_text = _table(num_text_tokens, hidden)
        self.head_text = WeightNormHead(num_text_tokens, hidden)
        self.head_code = nn.ModuleList(WeightNormHead(num_audio_tokens, hidden) for _ in range(num_vq))


def _table(rows: int, width: int) -> nn.Embedding:
    # given its (empty) weight, so it skips the random initialisation, whose meta-device form
    # imports torch._dynamo (seconds)
    return nn.Embedding(rows, width, _weight=torch.empty(rows, width))


def load_embed(path: Path, device: torch.device) -> Embed:
    """The widths come from the file: codebooks counted, table shapes read from its header."""
    shapes = file_shapes(path)
    num_vq = count_indexed(shapes, "emb_code.")
    num_audio, hidden = shape_of(shapes, "emb_code.0.weight", path)
    num_text = shape_of(shapes, "emb_text.weight", path)[0]
    embed = build_empty(lambda: Embed(hidden, num_audio, num_text, num_vq))
    return load_into(embed, path, device)

"""The speaker statistics: the mean and spread of speaker embeddings, from which voices are drawn.

Upstream keeps them in its code as a base16384 string of float16 std then mean; the release's
string is in ``release.py``, and synthetic weights use std 1, mean 0 at their own width. Imports
stay inside the functions: ``weights.py`` (read by light commands) imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.engine.modules.release import SPEAKER_STATS

if TYPE_CHECKING:
    import torch


def synthetic_speaker_stats(dim: int) -> str:
    """Std 1 and mean 0 for ``dim`` dimensions, in upstream's string form."""
    import numpy as np
    import pybase16384 as b14

    std = np.full(dim, 1.0, dtype=np.float16)
    mean = np.zeros(dim, dtype=np.float16)
    return b14.encode_to_string(np.concatenate([std, mean]).tobytes())


def speaker_stats(synthetic: bool, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """float16 std and mean [dim] on ``device``, as upstream's ``Speaker`` decodes them."""
    import numpy as np
    import pybase16384 as b14
    import torch

    text = synthetic_speaker_stats(dim) if synthetic else SPEAKER_STATS
    values = np.frombuffer(b14.decode_from_string(text), dtype=np.float16).copy()
    std, mean = torch.from_numpy(values).to(device=device).chunk(2)
    return std, mean

"""Voices from recordings: upstream's DVAE encoder, loaded from the ChatTTS package on first use.

Only ``voice new --from-audio`` needs it, and its quantiser comes from vector_quantize_pytorch
(einx, seconds to import), so nothing of it is imported or read until a recording is encoded.
"""

from __future__ import annotations

import threading
from dataclasses import asdict
from typing import Any

import torch

from pipeline.engine.weights import ModelFiles, build_config
from pipeline.errors import ModelError


class AudioEncoder:
    """``sample_audio(wave)`` -> DVAE codes [num_vq, T], as upstream's ``DVAE.sample_audio``."""

    def __init__(self, files: ModelFiles, device: torch.device) -> None:
        self._files = files
        self._device = device
        self._dvae: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._dvae is not None

    def sample_audio(self, wave: torch.Tensor) -> torch.Tensor:
        return self._model().sample_audio(wave)

    def _model(self) -> Any:
        with self._lock:
            if self._dvae is None:
                self._dvae = _load_upstream_dvae(self._files, self._device)
            return self._dvae


def _load_upstream_dvae(files: ModelFiles, device: torch.device) -> Any:
    from ChatTTS.model import DVAE

    config = build_config(files.size).dvae
    path = files.asset("asset/DVAE.safetensors")
    dvae = DVAE(decoder_config=asdict(config.decoder), encoder_config=asdict(config.encoder),
                vq_config=asdict(config.vq), dim=config.decoder.idim, device=device)
    try:
        dvae.load_pretrained(str(path), device)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ModelError(f"{path}: could not be loaded ({exc}); the file may be truncated or "
                         "from another release: download the weights again") from exc
    return dvae.eval()

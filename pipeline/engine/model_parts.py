"""What the engine runs, read from the weight files by ``loading.py``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.engine.gpt import FusedLlama
from pipeline.engine.modules.audio_encoder import AudioEncoder
from pipeline.engine.modules.tokenizer import TextTokenizer
from pipeline.engine.prompts import TokenEmbeddings
from pipeline.engine.waveform import WaveformDecoder


@dataclass
class ModelParts:
    """The GPT, its embeddings, the Decoder+Vocos, the tokenizer and the speaker statistics."""

    gpt: FusedLlama
    embeddings: TokenEmbeddings
    waveform: WaveformDecoder
    tokenizer: TextTokenizer
    dvae: AudioEncoder  # upstream's DVAE, loaded on first use (voices from recordings)
    speaker_std: torch.Tensor  # float16 [C]
    speaker_mean: torch.Tensor  # float16 [C]
    max_positions: int

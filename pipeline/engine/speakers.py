"""The voices an engine reads with: parsed once and kept (a book reads every sentence with one or
two; decoding one costs ~0.1 ms, times every sentence of a batch), sampled from a seed, or encoded
from a recording. The strings themselves are ``voices.py``'s."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pipeline.engine.audio_io import read_reference_audio
from pipeline.engine.voices import SpeakerEmbedding, Voice, encode_audio_prompt, encode_speaker, parse_voice
from pipeline.errors import VoiceError

if TYPE_CHECKING:
    from pipeline.engine.model_parts import ModelParts

KEPT_VOICES = 64


class Speakers:
    def __init__(self, parts: ModelParts) -> None:
        self._parts = parts
        self._parsed: dict[str, Voice] = {}

    def get(self, voice: str) -> Voice:
        """The parsed voice (kept: the few recent ones). Raises VoiceError for a bad voice."""
        parsed = self._parsed.get(voice)
        if parsed is None:
            parsed = self._parse(voice)
            if len(self._parsed) >= KEPT_VOICES:
                self._parsed.clear()
            self._parsed[voice] = parsed
        return parsed

    def forget(self) -> None:
        self._parsed.clear()

    def _parse(self, voice: str) -> Voice:
        emb = self._parts.embeddings
        parsed = parse_voice(voice, self._parts.gpt.hidden, emb.codebooks)
        if not isinstance(parsed, SpeakerEmbedding) and int(parsed.codes.max()) >= emb.vocab - 1:
            raise VoiceError("audio prompt holds codes outside the model's codebooks; make it "
                             "again with voice_from_audio")
        return parsed

    def sample(self, seed: int) -> str:
        """A random speaker embedding, as upstream's ``sample_random_speaker`` draws it, but from
        ``seed`` (the same seed always gives the same voice)."""
        parts = self._parts
        generator = torch.Generator().manual_seed(int(seed))
        z = torch.randn(parts.gpt.hidden, generator=generator).half()
        vector = z * parts.speaker_std.cpu() + parts.speaker_mean.cpu()
        return encode_speaker(vector.numpy())

    @torch.inference_mode()
    def from_audio(self, path: Path) -> str:
        """Upstream's DVAE-encoded reference (``spk_smp``) of a recording.

        Raises:
            VoiceError: naming the file, when it cannot be read or holds no usable speech.
        """
        wave = read_reference_audio(Path(path))
        try:
            codes = self._parts.dvae.sample_audio(torch.from_numpy(wave))
        except RuntimeError as exc:
            raise VoiceError(f"{path}: the reference audio could not be encoded ({exc}); use a "
                             "mono WAV of 2-30 s of clean speech") from exc
        return encode_audio_prompt(codes.cpu().numpy())

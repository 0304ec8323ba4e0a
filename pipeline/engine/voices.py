"""Voices: the two compact strings upstream uses, told apart, decoded and cached.

- A *speaker embedding* (upstream's ``spk_emb``): base16384(lzma(float16[hidden])). It replaces the
  ``[spk_emb]`` token's embedding in the prompt. ``Engine.sample_voice`` makes these.
- An *audio prompt* (upstream's ``spk_smp``): base16384(uint16 shape[2] + lzma(uint16[num_vq, T]))
  of DVAE codes of a reference recording. Its codes are appended to the prompt, and the prompt then
  carries ``[empty_spk]``. ``Engine.voice_from_audio`` makes these.
"""

from __future__ import annotations

import lzma
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipeline.errors import VoiceError

_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


@dataclass(frozen=True)
class SpeakerEmbedding:
    vector: np.ndarray  # float16 [hidden], as stored (upstream L2-normalises it when applying)


@dataclass(frozen=True)
class AudioPrompt:
    codes: np.ndarray  # int32 [num_vq, T]


Voice = SpeakerEmbedding | AudioPrompt


def encode_speaker(vector: np.ndarray) -> str:
    """Upstream's compact form of a speaker embedding (``Speaker._encode``)."""
    import pybase16384 as b14

    raw = np.asarray(vector, dtype=np.float16).tobytes()
    return b14.encode_to_string(lzma.compress(raw, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS))


def encode_audio_prompt(codes: np.ndarray) -> str:
    """Upstream's compact form of DVAE reference codes (``Speaker.encode_prompt``)."""
    import pybase16384 as b14

    arr = np.asarray(codes).astype("<u2")
    if arr.ndim != 2:
        raise ValueError("audio prompt codes must be 2-D [num_vq, T]")
    header = np.array(arr.shape, dtype="<u2").tobytes()
    body = lzma.compress(arr.tobytes(), format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    return b14.encode_to_string(header + body)


@lru_cache(maxsize=256)
def parse_voice(voice: str, hidden: int, num_vq: int) -> Voice:
    """Decode ``voice`` into a speaker embedding or an audio prompt.

    Raises:
        VoiceError: the string is neither form (or is for a model of another width).
    """
    import pybase16384 as b14

    if not voice:
        raise VoiceError("empty voice string: sample one with `Engine.sample_voice(seed)` or "
                         "make one from a recording with `Engine.voice_from_audio(path)`")
    try:
        data = b14.decode_from_string(voice)
    except Exception as exc:  # the codec raises plain ValueError/RuntimeError on bad input
        raise VoiceError(f"voice string is not base16384 ({exc}); use a string made by "
                         "sample_voice or voice_from_audio") from exc
    embedding = _try_embedding(data, hidden)
    if embedding is not None:
        return embedding
    prompt = _try_audio_prompt(data, num_vq)
    if prompt is not None:
        return prompt
    raise VoiceError(f"voice string ({len(voice)} chars) is neither a speaker embedding of width "
                     f"{hidden} nor an audio prompt of {num_vq} codebooks; it may be for another "
                     "model: make it again with sample_voice or voice_from_audio")


def _try_embedding(data: bytes, hidden: int) -> SpeakerEmbedding | None:
    raw = _decompress(data)
    if raw is None or len(raw) != hidden * 2:
        return None
    vector = np.frombuffer(raw, dtype=np.float16).copy()
    if not np.isfinite(vector).all():
        return None
    return SpeakerEmbedding(vector=vector)


def _try_audio_prompt(data: bytes, num_vq: int) -> AudioPrompt | None:
    if len(data) < 5:
        return None
    shape = tuple(int(v) for v in np.frombuffer(data[:4], dtype="<u2"))
    raw = _decompress(data[4:])
    if raw is None or shape[0] != num_vq or shape[1] == 0 or len(raw) != shape[0] * shape[1] * 2:
        return None
    codes = np.frombuffer(raw, dtype="<u2").astype(np.int32).reshape(shape)
    return AudioPrompt(codes=codes)


def _decompress(data: bytes) -> bytes | None:
    try:
        return lzma.decompress(data, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    except lzma.LZMAError:
        return None

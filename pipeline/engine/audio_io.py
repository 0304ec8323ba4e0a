"""Reading a reference recording for ``Engine.voice_from_audio``: WAV via the standard library,
anything else via pydub (ffmpeg) when available. Mono, float32, 24 kHz out."""

from __future__ import annotations

import logging
import wave
from pathlib import Path

import numpy as np

from pipeline.errors import VoiceError

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
MIN_SECONDS = 1.0
MAX_SECONDS = 60.0
_FIX = "use a mono or stereo WAV (16-bit PCM) of 2-30 s of clean speech"


def read_reference_audio(path: Path) -> np.ndarray:
    """Float32 mono samples at 24 kHz, checked for length, finiteness and silence.

    Raises:
        VoiceError: naming ``path``, the problem and the fix.
    """
    if not path.is_file():
        raise VoiceError(f"{path}: no such file; {_FIX}")
    samples, rate = _decode(path)
    if samples.size == 0:
        raise VoiceError(f"{path}: the file holds no audio; {_FIX}")
    samples = _resample(samples, rate)
    seconds = samples.size / SAMPLE_RATE
    if seconds < MIN_SECONDS:
        raise VoiceError(f"{path}: only {seconds:.2f} s of audio, at least {MIN_SECONDS:.0f} s "
                         f"is needed; {_FIX}")
    if seconds > MAX_SECONDS:
        raise VoiceError(f"{path}: {seconds:.0f} s of audio is too long for a voice prompt "
                         f"(at most {MAX_SECONDS:.0f} s); cut a shorter clip")
    if not np.isfinite(samples).all():
        raise VoiceError(f"{path}: the audio holds NaN or infinite samples; {_FIX}")
    if float(np.abs(samples).max()) < 1e-4:
        raise VoiceError(f"{path}: the audio is silent; {_FIX}")
    return samples.astype(np.float32)


def _decode(path: Path) -> tuple[np.ndarray, int]:
    try:
        return _read_wav(path)
    except (wave.Error, EOFError, ValueError) as wav_error:
        try:
            return _read_with_pydub(path)
        except Exception as exc:  # pydub/ffmpeg raise many kinds
            log.debug("pydub could not read %s: %s", path, exc)
            raise VoiceError(f"{path}: not a readable audio file ({wav_error}); {_FIX}") from exc


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as f:
        channels, width, rate = f.getnchannels(), f.getsampwidth(), f.getframerate()
        raw = f.readframes(f.getnframes())
    if width == 1:
        data = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        data = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        ints = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16))
        ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
        data = ints.astype(np.float32) / float(1 << 23)
    elif width == 4:
        data = np.frombuffer(raw, "<i4").astype(np.float32) / float(1 << 31)
    else:
        raise ValueError(f"unsupported sample width {width} bytes")
    usable = data.size - data.size % channels
    return data[:usable].reshape(-1, channels).mean(axis=1), rate


def _read_with_pydub(path: Path) -> tuple[np.ndarray, int]:
    from pydub import AudioSegment

    segment = AudioSegment.from_file(str(path)).set_channels(1)
    data = np.array(segment.get_array_of_samples(), dtype=np.float32)
    return data / float(1 << (8 * segment.sample_width - 1)), segment.frame_rate


def _resample(samples: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE:
        return samples
    import torch
    import torchaudio.functional as AF

    return AF.resample(torch.from_numpy(samples.copy()), rate, SAMPLE_RATE).numpy()

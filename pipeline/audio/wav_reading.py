"""Sentence WAV files read back (validated) by assembly.

Reading is tolerant of other PCM layouts (pydub converts them) but strict about damage: a missing,
truncated or undecodable file is an :class:`~pipeline.errors.AssemblyError` that names the file and
the fix. The canonical layout ``wavio.py`` writes is read straight into samples, without pydub.
"""

from __future__ import annotations

import os
import struct
import warnings
import wave
from pathlib import Path

import numpy as np

with warnings.catch_warnings():
    # pydub warns when its import finds no ffmpeg on PATH; the commands that need ffmpeg check it
    # themselves and say so in their one error line, with the fix (pipeline/audio/ffmpeg_check.py)
    warnings.filterwarnings("ignore", message="Couldn't find ffmpeg", category=RuntimeWarning)
    from pydub import AudioSegment
    from pydub.exceptions import CouldntDecodeError

from pipeline.audio.failures import os_error_fix
from pipeline.audio.wavio import SAMPLE_WIDTH
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE

RESYNTHESIZE_FIX = "delete it and run the job again; synthesis redoes sentences whose audio is missing"


def read_sentence_audio(path: Path) -> AudioSegment:
    """Read a sentence WAV as a pydub segment in the canonical layout (16-bit mono 24 kHz).

    Args:
        path: the sentence WAV.

    Returns:
        The audio, converted by pydub if the file used another rate, width or channel count.

    Raises:
        AssemblyError: the file is missing, truncated or cannot be decoded.
    """
    path = Path(path)
    try:
        segment = _read_pcm_wav(path)
    except FileNotFoundError as exc:
        raise AssemblyError(
            f"{path}: sentence audio is missing (run the job again; synthesis redoes "
            "sentences whose audio is missing)"
        ) from exc
    except (wave.Error, EOFError):
        segment = _read_with_ffmpeg(path)  # e.g. float WAV, which the wave module cannot read
    except OSError as exc:
        raise AssemblyError(
            f"{path}: cannot read the sentence audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    return to_canonical(segment)


def read_sentence_samples(path: Path) -> np.ndarray:
    """A sentence WAV's int16 samples in the canonical layout (as ``read_sentence_audio``).

    A file exactly as :func:`write_sentence_wav` writes it (a 44-byte PCM header for 16-bit mono
    at SAMPLE_RATE, then the samples, nothing after) is read in one go and viewed in place;
    parsing it with the wave module and pydub would cost a third of writing a chapter. Anything else
    goes the general way (converted, or a clear error).

    Raises:
        AssemblyError: the file is missing, truncated or cannot be decoded.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        data = b""  # the general way says what is wrong
    if _is_canonical(data[:_CANONICAL_HEADER.size], len(data)):
        return np.frombuffer(data, dtype="<i2", offset=_CANONICAL_HEADER.size)
    return segment_samples(read_sentence_audio(path))


# "RIFF", size, "WAVE", a 16-byte "fmt " chunk (PCM, mono, rate, byte rate, block align, bits), "data", size
_CANONICAL_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")
_CANONICAL_LAYOUT = (b"WAVE", b"fmt ", 16, 1, 1, SAMPLE_RATE, SAMPLE_RATE * SAMPLE_WIDTH, SAMPLE_WIDTH,
                     8 * SAMPLE_WIDTH, b"data")


def _is_canonical(header: bytes, file_size: int) -> bool:
    """Whether a file of ``file_size`` bytes starting with ``header`` is a canonical WAV: the
    44-byte PCM header for 16-bit mono at SAMPLE_RATE, then the samples, nothing after."""
    if len(header) != _CANONICAL_HEADER.size:
        return False
    riff, riff_size, *layout, data_size = _CANONICAL_HEADER.unpack(header)
    return (riff == b"RIFF" and tuple(layout) == _CANONICAL_LAYOUT and riff_size == file_size - 8
            and data_size == file_size - _CANONICAL_HEADER.size)


def canonical_samples_offset(path: Path) -> int:
    """Where the samples start in a chapter WAV as the wave module writes it (16-bit mono at
    SAMPLE_RATE behind the canonical 44-byte header), for encoders that read a stretch of it raw.

    Raises:
        AssemblyError: the file is missing or laid out otherwise (then a raw read would be noise).
    """
    try:
        with open(path, "rb") as wav:
            header = wav.read(_CANONICAL_HEADER.size)
            size = os.fstat(wav.fileno()).st_size
    except OSError as exc:
        raise AssemblyError(
            f"{path}: cannot read the chapter audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    if _is_canonical(header, size):
        return _CANONICAL_HEADER.size
    raise AssemblyError(f"{path}: the chapter audio is not a 16-bit mono {SAMPLE_RATE} Hz WAV as stitched "
                        "(it changed after stitching; assemble the book again)")


def to_canonical(segment: AudioSegment) -> AudioSegment:
    """Convert any pydub segment to 16-bit mono at SAMPLE_RATE (a no-op when it already is)."""
    if segment.channels != 1:
        segment = segment.set_channels(1)
    if segment.sample_width != SAMPLE_WIDTH:
        segment = segment.set_sample_width(SAMPLE_WIDTH)
    if segment.frame_rate != SAMPLE_RATE:
        segment = segment.set_frame_rate(SAMPLE_RATE)
    return segment


def segment_samples(segment: AudioSegment) -> np.ndarray:
    """View a canonical segment's PCM as an int16 array (no copy)."""
    return np.frombuffer(segment.raw_data, dtype="<i2")


def _read_pcm_wav(path: Path) -> AudioSegment:
    with wave.open(str(path), "rb") as wav:
        channels, width, rate, frames = (
            wav.getnchannels(),
            wav.getsampwidth(),
            wav.getframerate(),
            wav.getnframes(),
        )
        data = wav.readframes(frames)
    expected = frames * channels * width
    if len(data) != expected:
        held = len(data) // max(1, channels * width)
        raise AssemblyError(
            f"{path}: sentence audio is truncated (its header promises {frames} samples, "
            f"the file holds {held}); {RESYNTHESIZE_FIX}"
        )
    if width not in (1, 2, 3, 4):
        raise AssemblyError(f"{path}: unsupported WAV sample width of {width} bytes; {RESYNTHESIZE_FIX}")
    return AudioSegment(data=data, sample_width=width, frame_rate=rate, channels=channels)


def _read_with_ffmpeg(path: Path) -> AudioSegment:
    try:
        return AudioSegment.from_file(str(path))
    except (CouldntDecodeError, IndexError, OSError) as exc:
        raise AssemblyError(
            f"{path}: sentence audio is corrupt or not a WAV file; {RESYNTHESIZE_FIX}"
        ) from exc

"""A short sample of how a book or a voice will sound: a few sentences' waveforms, trimmed and
joined with the audiobook's own pauses, brought to its loudness and written as one file (WAV, MP3,
Ogg Opus or FLAC, by the file's extension)."""

from __future__ import annotations

import tempfile
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.audio.assembly_types import CHAPTER_FORMATS, AssemblyOptions, SentenceAudio
from pipeline.audio.export import encode_clip
from pipeline.audio.stitch import pause_before
from pipeline.audio.trim import trim_silence
from pipeline.audio.wavio import float_to_pcm16
from pipeline.errors import OptionError
from pipeline.types import SAMPLE_RATE

PREVIEW_FORMATS = CHAPTER_FORMATS  # the formats one short file can take


def preview_format(path: Path) -> str:
    """The format ``path``'s extension names. Raises OptionError for one no preview is written in."""
    audio_format = path.suffix.lower().lstrip(".")
    if audio_format not in PREVIEW_FORMATS:
        raise OptionError(f"{path}: a preview is written as {', '.join('.' + f for f in PREVIEW_FORMATS)}; "
                          "name the file with one of these extensions")
    return audio_format


def write_preview(clips: Sequence[tuple[np.ndarray, int]], path: Path,
                  options: AssemblyOptions = AssemblyOptions()) -> float:
    """Write ``clips`` — (float waveform at 24 kHz, paragraph index) in reading order — as one
    file at ``path``; returns its length in seconds.

    Raises:
        OptionError: the file's extension names no format a preview is written in.
        AssemblyError: ffmpeg is missing or the file cannot be written.
    """
    audio_format = preview_format(path)
    samples = _joined(clips, options)
    with tempfile.TemporaryDirectory(prefix="tts-jobs-preview-") as work:
        joined = Path(work) / "joined.wav"
        with wave.open(str(joined), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(SAMPLE_RATE)
            out.writeframes(samples.tobytes())
        loudness = f"loudnorm=I={options.target_lufs}:TP={options.true_peak_db}"
        encode_clip(joined, audio_format, path, loudness, options.bitrate)
    return len(samples) / SAMPLE_RATE


def _joined(clips: Sequence[tuple[np.ndarray, int]], options: AssemblyOptions) -> np.ndarray:
    """The clips' speech (edges trimmed) with the pauses assembly puts between such sentences."""
    pieces: list[np.ndarray] = []
    previous: SentenceAudio | None = None
    for waveform, paragraph in clips:
        pcm = float_to_pcm16(waveform)
        speech = trim_silence(pcm) if options.trim_silence else pcm
        if speech.size == 0:
            continue
        current = SentenceAudio(Path(), paragraph)
        if previous is not None:
            pieces.append(np.zeros(SAMPLE_RATE * pause_before(previous, current, options) // 1000, np.int16))
        pieces.append(speech)
        previous = current
    return np.concatenate(pieces) if pieces else np.zeros(SAMPLE_RATE // 2, np.int16)

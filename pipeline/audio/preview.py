"""A short sample of how a book or a voice will sound: a few sentences' waveforms, trimmed and
joined with the audiobook's own pauses, levelled as the book's chapters are (one static gain to the
target loudness, and the limiter only where the peaks need it: ``export.chapter_loudness``, not
ffmpeg's dynamic ``loudnorm``, which rides the level up and down within the clip), and written as
one file (WAV, MP3, Ogg Opus or FLAC, by the file's extension)."""

from __future__ import annotations

import tempfile
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.audio.assembly_types import CHAPTER_FORMATS, AssemblyOptions, SentenceAudio
from pipeline.audio.export import chapter_loudness, encode_clip
from pipeline.audio.levelling import Loudness
from pipeline.audio.loudness import place_energies, sentence_energies, true_peak
from pipeline.audio.stitch import MeasuredChapter, pause_before
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
        encode_clip(joined, audio_format, path, preview_loudness(samples, options).ffmpeg_filter(len(samples)),
                    options.bitrate)
    return len(samples) / SAMPLE_RATE


def preview_loudness(samples: np.ndarray, options: AssemblyOptions) -> Loudness:
    """The gain (and limiter) a chapter made of ``samples`` (int16) gets in the book."""
    energies = place_energies([(0, sentence_energies(samples, SAMPLE_RATE))], len(samples), SAMPLE_RATE)
    peak = int(np.abs(samples.astype(np.int32)).max()) if samples.size else 0
    measured = MeasuredChapter(index=0, title="", sentences=(), trailing_silence=0, peak=peak,
                               true_peak=true_peak(samples), step_energies=energies)
    return chapter_loudness(measured, options)


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

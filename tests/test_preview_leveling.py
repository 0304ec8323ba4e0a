"""`preview` sounds like the book (issue 38): the clip gets one static gain to the book's target
loudness, as a chapter does, not ffmpeg's dynamic loudnorm, which evens a quiet and a loud sentence
out within the clip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.audio import AssemblyOptions
from pipeline.audio.ffmpeg import decode_pcm, measure_loudness
from pipeline.audio.preview import write_preview
from pipeline.types import SAMPLE_RATE


def voiced(amplitude: float, seconds: float, seed: int) -> np.ndarray:
    """A speech-like waveform: a tone under a syllable-rate envelope, float in [-1, 1]."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t + seed)
    return (amplitude * envelope * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def rms_db(samples: np.ndarray) -> float:
    return 20 * np.log10(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))


@pytest.mark.parametrize("extension", ["wav", "mp3"])
def test_a_quiet_and_a_loud_sentence_keep_their_difference_and_the_clip_reaches_the_books_level(
        tmp_path: Path, extension: str) -> None:
    quiet, loud = voiced(0.03, 3.0, 0), voiced(0.12, 3.0, 1)  # 12 dB apart
    path = tmp_path / f"preview.{extension}"
    seconds = write_preview([(quiet, 0), (loud, 0)], path, AssemblyOptions())
    audio = decode_pcm(path, SAMPLE_RATE)
    assert len(audio) / SAMPLE_RATE == pytest.approx(seconds, abs=0.1)
    first, last = audio[SAMPLE_RATE // 2: int(2.5 * SAMPLE_RATE)], audio[-int(2.5 * SAMPLE_RATE): -SAMPLE_RATE // 2]
    assert rms_db(last) - rms_db(first) == pytest.approx(12.0, abs=0.5)  # loudnorm left ~6 dB of it
    assert measure_loudness(path).integrated_lufs == pytest.approx(AssemblyOptions().target_lufs, abs=1.0)

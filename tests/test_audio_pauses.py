"""Pauses a listener hears: between sentences, paragraphs, after the title, between chapters."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.audio import (
    AssemblyOptions,
    ChapterAudio,
    SentenceAudio,
    assemble_audiobook,
    write_sentence_wav,
)
from pipeline.audio.ffmpeg import decode_pcm
from pipeline.audio.trim import TrimSettings
from pipeline.bench.synthetic_audio import tone_sentence
from pipeline.types import SAMPLE_RATE, BookMetadata

TRIM = TrimSettings()
MARGINS_MS = TRIM.lead_ms + TRIM.tail_ms  # what trimming keeps around each sentence


def write_chapter(directory, index, paragraphs):
    """paragraphs: paragraph indexes of the sentences, in order (-1 = title)."""
    sentences = []
    for number, paragraph in enumerate(paragraphs):
        path = directory / f"{index}_{number}.wav"
        write_sentence_wav(
            path, tone_sentence(frequency=300 + 50 * number, seconds=0.3, lead_seconds=0.25, tail_seconds=0.4)
        )
        sentences.append(SentenceAudio(path, paragraph))
    return ChapterAudio(index, f"Chapter {index + 1}", tuple(sentences))


def silent_gaps_ms(samples: np.ndarray) -> list[float]:
    """Lengths of the silent stretches between sounds, in ms."""
    sound = np.flatnonzero(np.abs(samples.astype(np.int32)) > 30)
    gaps = np.diff(sound)
    return [g / SAMPLE_RATE * 1000 for g in gaps[gaps > SAMPLE_RATE // 20]]


@pytest.mark.parametrize("pauses", [(300, 700, 1000, 2000), (150, 450, 1300, 600)])
def test_pauses_follow_the_options(tmp_path, pauses):
    sentence_ms, paragraph_ms, title_ms, chapter_ms = pauses
    options = AssemblyOptions(
        formats=("wav",),
        normalize_loudness=False,
        sentence_pause_ms=sentence_ms,
        paragraph_pause_ms=paragraph_ms,
        title_pause_ms=title_ms,
        chapter_pause_ms=chapter_ms,
    )
    chapters = [write_chapter(tmp_path, 0, [-1, 0, 0, 1]), write_chapter(tmp_path, 1, [-1, 0])]
    report = assemble_audiobook(
        chapters, BookMetadata(title="Pauses"), tmp_path / "out", tmp_path / "work", options
    )

    first, second = (decode_pcm(path, SAMPLE_RATE) for path in report.outputs)
    expected = [title_ms, sentence_ms, paragraph_ms]
    assert silent_gaps_ms(first) == pytest.approx([p + MARGINS_MS for p in expected], abs=12)
    assert silent_gaps_ms(second) == pytest.approx([title_ms + MARGINS_MS], abs=12)
    # The chapter pause ends the first chapter (so it sits between chapters in an M4B, too).
    trailing_ms = (
        (len(first) - 1 - np.flatnonzero(np.abs(first.astype(np.int32)) > 30)[-1]) / SAMPLE_RATE * 1000
    )
    assert trailing_ms == pytest.approx(chapter_ms + TRIM.tail_ms, abs=12)
    assert report.pause_seconds == pytest.approx((sum(expected) + title_ms + chapter_ms) / 1000)


def test_sentence_audio_is_trimmed_but_kept_whole(tmp_path):
    options = AssemblyOptions(formats=("wav",), normalize_loudness=False)
    chapter = write_chapter(tmp_path, 0, [0, 0])
    report = assemble_audiobook(
        [chapter], BookMetadata(title="T"), tmp_path / "out", tmp_path / "work", options
    )
    samples = decode_pcm(report.outputs[0], SAMPLE_RATE)
    # two 0.3 s tones + margins + one sentence pause; the 0.25/0.4 s of silence around each is gone
    expected = 2 * (0.3 + MARGINS_MS / 1000) + 0.3
    assert len(samples) / SAMPLE_RATE == pytest.approx(expected, abs=0.021)
    assert report.sentence_seconds == pytest.approx(2 * (0.3 + MARGINS_MS / 1000), abs=0.021)


def test_trimming_can_be_switched_off(tmp_path):
    options = AssemblyOptions(formats=("wav",), normalize_loudness=False, trim_silence=False)
    chapter = write_chapter(tmp_path, 0, [0, 0])
    report = assemble_audiobook(
        [chapter], BookMetadata(title="T"), tmp_path / "out", tmp_path / "work", options
    )
    samples = decode_pcm(report.outputs[0], SAMPLE_RATE)
    assert len(samples) / SAMPLE_RATE == pytest.approx(2 * (0.25 + 0.3 + 0.4) + 0.3, abs=0.001)

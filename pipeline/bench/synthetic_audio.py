"""Synthetic sentence audio for tests and benchmarks: tones and noise, never speech.

Each sentence is a burst of sound with silence (optionally faint hiss) on both sides, so trimming,
pauses, loudness and chapter timing can be checked against known numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.audio import ChapterAudio, SentenceAudio, write_sentence_wav
from pipeline.types import SAMPLE_RATE


def tone_sentence(
    frequency: float = 220.0,
    seconds: float = 0.5,
    amplitude: float = 0.3,
    lead_seconds: float = 0.2,
    tail_seconds: float = 0.2,
    hiss: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """A sine burst with silence around it (float32, SAMPLE_RATE).

    Args:
        frequency: Hz.
        seconds: length of the burst.
        amplitude: peak of the burst, full scale = 1.
        lead_seconds / tail_seconds: silence before / after.
        hiss: amplitude of white noise over the whole sentence (0 = digital silence around it).
        seed: for the hiss.
    """
    body = amplitude * np.sin(2 * np.pi * frequency * np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE)
    lead, tail = np.zeros(round(lead_seconds * SAMPLE_RATE)), np.zeros(round(tail_seconds * SAMPLE_RATE))
    waveform = np.concatenate((lead, body, tail))
    if hiss:
        waveform += hiss * np.random.default_rng(seed).standard_normal(waveform.size)
    return waveform.astype(np.float32)


def speechlike_sentence(
    rng: np.random.Generator, seconds: float = 5.0, edge_seconds: float = 0.25
) -> np.ndarray:
    """Syllable-rate modulated voiced tone plus noise, with faint hiss either side (NOT speech)."""
    body = round(seconds * SAMPLE_RATE)
    t = np.arange(body) / SAMPLE_RATE
    envelope = np.clip(np.sin(2 * np.pi * rng.uniform(3.0, 5.0) * t + rng.uniform(0, 6.28)), 0, None) ** 0.5
    voiced = 0.25 * np.sin(2 * np.pi * rng.uniform(110, 220) * t)
    speech = envelope * (voiced + 0.08 * rng.standard_normal(body))
    edge = np.zeros(round(edge_seconds * SAMPLE_RATE))
    hiss = 1e-4 * rng.standard_normal(2 * len(edge) + body)
    return (np.concatenate((edge, speech, edge)) + hiss).astype(np.float32)


def tone_book(
    directory: Path,
    titles: Sequence[str],
    body_sentences: int = 2,
    seconds: float = 0.4,
    amplitude: float = 0.3,
    sentences_per_paragraph: int = 2,
) -> list[ChapterAudio]:
    """Write a small book of tone sentences: per chapter a title sentence, then body sentences.

    Args:
        directory: where the sentence WAVs go.
        titles: one chapter per title.
        body_sentences: body sentences per chapter (after the title sentence).
        seconds / amplitude: of every tone burst (each has 0.2 s of silence either side).
        sentences_per_paragraph: body sentences before the paragraph index advances.

    Returns:
        The chapters, ready for :func:`pipeline.audio.assemble_audiobook`.
    """
    chapters = []
    for chapter_index, title in enumerate(titles):
        sentences = []
        for number in range(body_sentences + 1):
            path = directory / f"c{chapter_index:03d}_s{number:03d}.wav"
            write_sentence_wav(
                path,
                tone_sentence(
                    frequency=220.0 + 40 * number + 10 * chapter_index, seconds=seconds, amplitude=amplitude
                ),
                durable=False,  # throwaway test data: no need to survive a power cut
            )
            paragraph = -1 if number == 0 else (number - 1) // sentences_per_paragraph
            sentences.append(SentenceAudio(path, paragraph))
        chapters.append(ChapterAudio(chapter_index, title, tuple(sentences)))
    return chapters

"""A chapter from its sentence WAVs: measured from its sentences, then written with pauses.

1. :func:`measure_chapter` lays the chapter out — every sentence's speech (trimmed) and the pause
   before it — from the sentences' measures (:mod:`pipeline.audio.measure`: kept beside each WAV
   by the GPU worker, or taken now), and sums their loudness and peaks. No audio is read for
   sentences measured ahead.
2. :func:`chapter_pcm` gives the chapter's audio in that layout, block by block (each sentence read
   by itself, so memory stays at a few sentences however long the chapter is): :func:`stitch_chapter` writes
   them to a chapter WAV in the work directory for the encoders; a WAV output that needs no
   limiter is written straight from them with the book's gain (``gained_wav.write_chapter_wav``).
"""

from __future__ import annotations

import logging
import os
import wave
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.audio.assembly_types import AssemblyOptions, ChapterAudio, SentenceAudio
from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.loudness import place_energies
from pipeline.audio.measure import measure_sentence
from pipeline.audio.trim import cut_speech
from pipeline.audio.wav_reading import read_sentence_samples
from pipeline.audio.wavio import SAMPLE_WIDTH
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

TITLE_PARAGRAPH = -1


@dataclass(frozen=True)
class PlacedSentence:
    """One sentence's speech in a chapter: ``path``'s samples ``start:end`` after ``pause`` samples of silence."""

    path: str  # a str, not a Path: a chapter's layout crosses a pipe twice, and Paths unpickle slowly
    start: int
    end: int
    pause: int


@dataclass(frozen=True)
class MeasuredChapter:
    """A chapter laid out from its sentences, with its loudness and peaks: nothing written yet."""

    index: int
    title: str
    sentences: tuple[PlacedSentence, ...] = field(repr=False)
    trailing_silence: int  # samples of silence after the last sentence (the chapter pause), safe to shorten
    peak: int  # largest absolute int16 sample
    true_peak: float  # estimated largest inter-sample peak, int16 scale
    step_energies: np.ndarray = field(repr=False, compare=False)  # K-weighted, per 100 ms

    @property
    def sentence_samples(self) -> int:
        return sum(sentence.end - sentence.start for sentence in self.sentences)

    @property
    def pause_samples(self) -> int:
        return sum(sentence.pause for sentence in self.sentences) + self.trailing_silence

    @property
    def samples(self) -> int:  # total length, trailing chapter pause included
        return self.sentence_samples + self.pause_samples

    @property
    def seconds(self) -> float:
        return self.samples / SAMPLE_RATE


@dataclass(frozen=True)
class StitchedChapter:
    """A chapter's audio as written to the work directory (the encoders' input)."""

    index: int
    title: str
    wav_path: Path
    samples: int  # total length, trailing chapter pause included
    trailing_silence: int  # samples of pure silence at the end (the chapter pause), safe to shorten
    # (sample, pause): each sentence but the first starts its speech at ``sample`` after ``pause``
    # samples of silence; an M4B encode may cut the chapter there (pipeline/audio/aac.py)
    cut_points: tuple[tuple[int, int], ...] = field(default=(), repr=False)

    @property
    def seconds(self) -> float:
        return self.samples / SAMPLE_RATE


def cut_points(chapter: MeasuredChapter) -> tuple[tuple[int, int], ...]:
    """Where each sentence after the first starts its speech in the chapter, and its pause before."""
    points, position = [], 0
    for number, sentence in enumerate(chapter.sentences):
        position += sentence.pause
        if number:
            points.append((position, sentence.pause))
        position += sentence.end - sentence.start
    return tuple(points)


def pause_before(previous: SentenceAudio, current: SentenceAudio, options: AssemblyOptions) -> int:
    """The pause (ms) between two consecutive sentences of one chapter.

    A title followed by body text gets the title pause; a change of paragraph the paragraph pause;
    anything else (including a title spoken as several sentences) the sentence pause.
    """
    if previous.paragraph_index == TITLE_PARAGRAPH and current.paragraph_index != TITLE_PARAGRAPH:
        return options.title_pause_ms
    if previous.paragraph_index != current.paragraph_index:
        return options.paragraph_pause_ms
    return options.sentence_pause_ms


def measure_chapter(chapter: ChapterAudio, options: AssemblyOptions, trailing_pause_ms: int) -> MeasuredChapter:
    """Lay one chapter out from its sentences' measures and sum its loudness and peaks.

    Args:
        chapter: the chapter's sentences in reading order.
        options: pauses and trimming.
        trailing_pause_ms: silence after the last sentence (the gap to the next chapter).

    Raises:
        AssemblyError: the chapter has no sentences, or a sentence WAV is missing or corrupt.
    """
    if not chapter.sentences:
        raise AssemblyError(
            f"chapter {chapter.index + 1} ({chapter.title!r}) has no sentence audio "
            "(the chapter needs at least one sentence; check the book's text stage)"
        )
    placed: list[PlacedSentence] = []
    energies: list[tuple[int, np.ndarray]] = []
    peak, true_peak, position = 0, 0.0, 0
    previous: SentenceAudio | None = None
    for sentence in chapter.sentences:
        measure = measure_sentence(sentence.path, options.trim_silence)
        if measure.samples == 0:
            log.warning("%s: no speech found in the sentence audio; it is left out", sentence.path)
            continue
        pause = 0 if previous is None else _ms_samples(pause_before(previous, sentence, options))
        position += pause
        placed.append(PlacedSentence(str(sentence.path), measure.start, measure.end, pause))
        energies.append((position, measure.energies))
        position += measure.samples
        peak, true_peak = max(peak, measure.peak), max(true_peak, measure.true_peak)
        previous = sentence
    if previous is None:
        log.warning(
            "chapter %d (%r): no sentence holds speech; it becomes a short silence",
            chapter.index + 1,
            chapter.title,
        )
        trailing_pause_ms = max(trailing_pause_ms, options.title_pause_ms, 1)
    trailing_pause = _ms_samples(trailing_pause_ms)
    return MeasuredChapter(
        index=chapter.index,
        title=chapter.title,
        sentences=tuple(placed),
        trailing_silence=trailing_pause,
        peak=peak,
        true_peak=true_peak,
        step_energies=place_energies(energies, position + trailing_pause, SAMPLE_RATE),
    )


def chapter_pcm(chapter: MeasuredChapter) -> Iterator[np.ndarray]:
    """The chapter's audio in order as int16 blocks: each sentence's pause (silence) and then its
    speech (edges faded where trimmed); the trailing pause last. Blocks are handed over as they
    are, not joined (a join would copy every sample once more); a silence block is a read-only view
    that may be shared between blocks, so a writer must not change it.

    Raises:
        AssemblyError: a sentence WAV is missing, corrupt, or not the one that was measured.
    """
    for sentence in chapter.sentences:
        samples = read_sentence_samples(sentence.path)
        if len(samples) < sentence.end:
            raise AssemblyError(
                f"{sentence.path}: sentence audio changed while the book was assembled "
                "(it is shorter than when it was measured); assemble the book again"
            )
        yield from silence_blocks(sentence.pause)
        yield cut_speech(samples, sentence.start, sentence.end)
    yield from silence_blocks(chapter.trailing_silence)


_SILENCE = np.zeros(SAMPLE_RATE * 10, dtype=np.int16)
_SILENCE.flags.writeable = False


def silence_blocks(samples: int) -> Iterator[np.ndarray]:
    """``samples`` of digital silence as views of one shared block of zeros (none when 0)."""
    while samples > 0:
        block = _SILENCE[: min(samples, len(_SILENCE))]
        yield block
        samples -= len(block)


def is_silence(block: np.ndarray) -> bool:
    """Whether ``block`` came from :func:`silence_blocks` (a gain leaves it as it is)."""
    return block.base is _SILENCE


def stitch_chapter(chapter: MeasuredChapter, wav_path: Path) -> StitchedChapter:
    """Write one chapter WAV (16-bit mono) to the work directory, atomically.

    Raises:
        AssemblyError: a sentence WAV is missing or corrupt, or the work directory is full.
    """
    tmp_path = temporary_sibling(wav_path)
    try:
        with wave.open(str(tmp_path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(SAMPLE_WIDTH)
            out.setframerate(SAMPLE_RATE)
            out.setnframes(chapter.samples)  # the header is right from the start: no rewrite per sentence
            for block in chapter_pcm(chapter):
                out.writeframesraw(block)
        os.replace(tmp_path, wav_path)
    except OSError as exc:
        remove_quietly(tmp_path)
        raise AssemblyError(
            f"{wav_path}: cannot write the chapter audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    except BaseException:
        remove_quietly(tmp_path)
        raise
    return StitchedChapter(
        index=chapter.index,
        title=chapter.title,
        wav_path=wav_path,
        samples=chapter.samples,
        trailing_silence=chapter.trailing_silence,
        cut_points=cut_points(chapter),
    )


def _ms_samples(milliseconds: int) -> int:
    """Samples in ``milliseconds`` (24 per ms: no float rounding)."""
    return SAMPLE_RATE * milliseconds // 1000

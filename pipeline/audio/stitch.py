"""Stitch one chapter's sentence WAVs, with pauses, into one chapter WAV in the work directory.

pydub does the stitching (the design card): every sentence is read as an ``AudioSegment``, trimmed,
and joined to the pause in front of it. The chapter is *streamed* to disk sentence by sentence and
measured for loudness on the way, so memory stays at a few sentences however long the chapter is.
"""

from __future__ import annotations

import logging
import os
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydub import AudioSegment

from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.loudness import LoudnessMeter
from pipeline.audio.model import AssemblyOptions, ChapterAudio, SentenceAudio
from pipeline.audio.trim import trim_silence
from pipeline.audio.wavio import SAMPLE_WIDTH, read_sentence_audio, samples_segment, segment_samples
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

TITLE_PARAGRAPH = -1


@dataclass(frozen=True)
class StitchedChapter:
    """A chapter's audio as written to the work directory, with what was measured on the way."""

    index: int
    title: str
    wav_path: Path
    samples: int  # total length, trailing chapter pause included
    sentence_samples: int
    pause_samples: int
    trailing_silence: int  # samples of pure silence at the end (the chapter pause), safe to shorten
    peak: int  # largest absolute int16 sample
    true_peak: float  # estimated largest inter-sample peak, int16 scale
    step_energies: np.ndarray = field(repr=False, compare=False)  # K-weighted, per 100 ms

    @property
    def seconds(self) -> float:
        return self.samples / SAMPLE_RATE


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


def stitch_chapter(
    chapter: ChapterAudio, wav_path: Path, options: AssemblyOptions, trailing_pause_ms: int
) -> StitchedChapter:
    """Build one chapter WAV (16-bit mono) from its sentences.

    Args:
        chapter: the chapter's sentences in reading order.
        wav_path: where the chapter WAV goes (in the work directory); written atomically.
        options: pauses and trimming.
        trailing_pause_ms: silence appended after the last sentence (the gap to the next chapter).

    Returns:
        Lengths, peak and loudness steps of what was written.

    Raises:
        AssemblyError: a sentence WAV is missing or corrupt, or the work directory is full.
    """
    if not chapter.sentences:
        raise AssemblyError(
            f"chapter {chapter.index + 1} ({chapter.title!r}) has no sentence audio "
            "(the chapter needs at least one sentence; check the book's text stage)"
        )
    meter = LoudnessMeter(SAMPLE_RATE)
    tmp_path = wav_path.with_name(f".{wav_path.name}.tmp")
    sentence_samples = pause_samples = 0
    try:
        with wave.open(str(tmp_path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(SAMPLE_WIDTH)
            out.setframerate(SAMPLE_RATE)

            def emit(piece: AudioSegment) -> None:
                samples = segment_samples(piece)
                meter.add(samples)
                out.writeframes(piece.raw_data)

            previous: SentenceAudio | None = None
            for sentence in chapter.sentences:
                speech = _sentence_speech(sentence, options)
                if len(speech.raw_data) == 0:
                    log.warning("%s: no speech found in the sentence audio; it is left out", sentence.path)
                    continue
                pause_ms = 0 if previous is None else pause_before(previous, sentence, options)
                pause = silence(pause_ms)
                emit(pause + speech)
                pause_samples += _frames(pause)
                sentence_samples += _frames(speech)
                previous = sentence
            if previous is None:
                log.warning(
                    "chapter %d (%r): no sentence holds speech; it becomes a short silence",
                    chapter.index + 1,
                    chapter.title,
                )
                trailing_pause_ms = max(trailing_pause_ms, options.title_pause_ms, 1)
            tail = silence(trailing_pause_ms)
            emit(tail)
            pause_samples += _frames(tail)
            trailing_silence = _frames(tail)
        os.replace(tmp_path, wav_path)
    except OSError as exc:
        remove_quietly(tmp_path)
        raise AssemblyError(
            f"{wav_path}: cannot write the chapter audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    except BaseException:
        remove_quietly(tmp_path)
        raise
    meter.finish()
    return StitchedChapter(
        index=chapter.index,
        title=chapter.title,
        wav_path=wav_path,
        samples=sentence_samples + pause_samples,
        sentence_samples=sentence_samples,
        pause_samples=pause_samples,
        trailing_silence=trailing_silence,
        peak=meter.peak,
        true_peak=meter.true_peak,
        step_energies=meter.step_energies,
    )


def silence(milliseconds: int) -> AudioSegment:
    """Digital silence of exactly ``milliseconds`` (24 samples per ms: no float rounding)."""
    return samples_segment(np.zeros(SAMPLE_RATE * milliseconds // 1000, dtype=np.int16))


def _sentence_speech(sentence: SentenceAudio, options: AssemblyOptions) -> AudioSegment:
    segment = read_sentence_audio(sentence.path)
    if not options.trim_silence:
        return segment
    return samples_segment(trim_silence(segment_samples(segment)))


def _frames(segment: AudioSegment) -> int:
    return len(segment.raw_data) // SAMPLE_WIDTH

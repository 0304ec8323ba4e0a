"""Sentence measures: a chapter's loudness from its sentences agrees with metering the stitched
chapter; measures are kept beside the WAVs, reused only for the very file, and measured ahead."""

from __future__ import annotations

import os
import wave

import numpy as np
import pytest

from pipeline.audio import (
    AssemblyOptions,
    ChapterAudio,
    SentenceAudio,
    assemble_audiobook,
    write_sentence_wav,
)
from pipeline.audio import measure as measure_module
from pipeline.audio.loudness import LoudnessMeter, integrated_lufs, true_peak
from pipeline.audio.measure import MeasureAhead, measure_path, measure_sentence
from pipeline.audio.stitch import chapter_pcm, measure_chapter
from pipeline.audio.stitch_helpers import stop_idle_helpers
from pipeline.bench.synthetic_audio import speechlike_sentence
from pipeline.types import SAMPLE_RATE, BookMetadata


def speech_chapter(directory, sentences: int, seed: int, index: int = 0) -> ChapterAudio:
    """Sentences of speech-like audio at different levels, with silence around them (trimmed)."""
    rng = np.random.default_rng(seed)
    audio = []
    for number in range(sentences):
        level = rng.uniform(0.05, 0.6)
        speech = level * speechlike_sentence(rng, rng.uniform(0.4, 3.5))
        lead, tail = np.zeros(rng.integers(0, 6000)), np.zeros(rng.integers(0, 9000))
        path = directory / f"{index:02d}" / f"{number:03d}.wav"
        write_sentence_wav(path, np.concatenate([lead, speech, tail]))
        audio.append(SentenceAudio(path, -1 if number == 0 else number // 3))
    return ChapterAudio(index, f"Chapter {index + 1}", tuple(audio))


def stitched_samples(chapter) -> np.ndarray:
    return np.concatenate(list(chapter_pcm(chapter)))


@pytest.mark.parametrize("pauses", [(300, 700, 1000), (0, 40, 90)])
def test_chapter_loudness_from_sentences_agrees_with_metering_the_chapter(tmp_path, pauses):
    """Measured sentence by sentence (each filter from rest, its 10 ms energies placed on the
    chapter's 100 ms steps), the book lands on the loudness the meter finds in the stitched
    chapters — with the usual pauses and with pauses shorter than the filter's ring-out."""
    sentence_ms, paragraph_ms, title_ms = pauses
    options = AssemblyOptions(sentence_pause_ms=sentence_ms, paragraph_pause_ms=paragraph_ms,
                              title_pause_ms=title_ms)
    chapters = [measure_chapter(speech_chapter(tmp_path, 24, seed, seed), options, 2000) for seed in range(3)]
    meters = []
    for chapter in chapters:
        samples = stitched_samples(chapter)
        assert len(samples) == chapter.samples
        meter = LoudnessMeter(SAMPLE_RATE)
        meter.add(samples)
        meter.finish()
        meters.append(meter)
        assert chapter.peak == meter.peak
        assert chapter.true_peak == pytest.approx(meter.true_peak, rel=1e-3)
        assert len(chapter.step_energies) == len(meter.step_energies)
        loud = meter.step_energies > 1e-4 * meter.step_energies.max()
        assert chapter.step_energies[loud] == pytest.approx(meter.step_energies[loud], rel=0.1)
    from_sentences = integrated_lufs([chapter.step_energies for chapter in chapters])
    metered = integrated_lufs([meter.step_energies for meter in meters])
    assert from_sentences == pytest.approx(metered, abs=0.02)


def test_a_measure_is_kept_and_reused_only_for_the_same_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    path = tmp_path / "s.wav"
    write_sentence_wav(path, np.concatenate([np.zeros(4000), 0.3 * speechlike_sentence(rng, 2.0)]))
    first = measure_sentence(path, trim=True)
    assert measure_path(path).exists() and first.start > 0 and first.samples > SAMPLE_RATE

    def no_reading(_path):
        raise AssertionError("the kept measure should have been used")

    with monkeypatch.context() as patch:  # kept: nothing is read
        patch.setattr(measure_module, "read_sentence_samples", no_reading)
        again = measure_sentence(path, trim=True)
    assert (again.start, again.end, again.peak, again.true_peak) == (first.start, first.end, first.peak,
                                                                     first.true_peak)
    assert np.array_equal(again.energies, first.energies)

    untrimmed = measure_sentence(path, trim=False)  # other trimming: measured again
    assert (untrimmed.start, untrimmed.end) == (0, len(wav_samples(path)) // 2)

    write_sentence_wav(path, 0.05 * speechlike_sentence(rng, 1.0))  # synthesized again
    redone = measure_sentence(path, trim=True)
    assert redone.peak < first.peak and redone.samples < first.samples

    measure_path(path).write_bytes(measure_path(path).read_bytes()[:-3] + b"xyz")  # damaged
    assert measure_sentence(path, trim=True).peak == redone.peak


def test_a_chapter_of_measured_sentences_is_written_without_reading_them_twice(tmp_path, monkeypatch):
    """Measured ahead (as a GPU worker does, in helpers that yield the CPU to it), every measure
    is reused and the book's WAV files come out sample for sample as when assembly measures
    everything itself."""
    from pipeline.audio import stitch_helpers

    monkeypatch.setattr(stitch_helpers, "_niceness", 0)  # what MeasureAhead sets is undone after
    chapters = [speech_chapter(tmp_path / "book", 6, seed, seed) for seed in range(2)]
    paths = [sentence.path for chapter in chapters for sentence in chapter.sentences]
    fresh = assemble_audiobook(chapters, BookMetadata(title="M"), tmp_path / "fresh", tmp_path / "work1",
                               AssemblyOptions(formats=("wav",), threads=2))
    for path in paths:
        measure_path(path).unlink()
    stop_idle_helpers()  # the assembly's: not niced
    ahead = MeasureAhead(helpers=1)
    try:
        for path in paths:  # as each WAV is written
            ahead.add(path)
        ahead.close()
        [helper] = stitch_helpers.idle_helper_pids()
        assert os.getpriority(os.PRIO_PROCESS, helper) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
    finally:
        ahead.close()
        stop_idle_helpers()
    assert ahead.measured == len(paths) and all(measure_path(path).exists() for path in paths)
    kept = {path: measure_path(path).stat().st_mtime_ns for path in paths}
    again = assemble_audiobook(chapters, BookMetadata(title="M"), tmp_path / "again", tmp_path / "work2",
                               AssemblyOptions(formats=("wav",), threads=2))
    assert {path: measure_path(path).stat().st_mtime_ns for path in paths} == kept  # none measured again
    assert again.gain_db == fresh.gain_db and len(again.outputs) == 2
    for one, other in zip(fresh.outputs, again.outputs, strict=True):
        assert wav_samples(one) == wav_samples(other)


def test_wav_straight_from_sentences_matches_the_stitched_route(tmp_path):
    """A WAV-only book skips the stitched work files; a book that also wants an M4B stitches
    them and writes its WAVs from them — the WAVs are the same, sample for sample."""
    chapters = [speech_chapter(tmp_path / "book", 5, seed, seed) for seed in range(2)]
    direct = assemble_audiobook(chapters, BookMetadata(title="W"), tmp_path / "direct", tmp_path / "w1",
                                AssemblyOptions(formats=("wav",)))
    stitched = assemble_audiobook(chapters, BookMetadata(title="W"), tmp_path / "both", tmp_path / "w2",
                                  AssemblyOptions(formats=("m4b", "wav")))
    wavs = [path for path in stitched.outputs if path.suffix == ".wav"]
    assert [p.name for p in direct.outputs] == [p.name for p in wavs]
    for one, other in zip(direct.outputs, wavs, strict=True):
        assert wav_samples(one) == wav_samples(other)
    assert direct.chapters == stitched.chapters


def test_a_missing_sentence_is_named_when_measured(tmp_path):
    from pipeline.errors import AssemblyError

    chapter = speech_chapter(tmp_path, 3, 1)
    os.unlink(chapter.sentences[1].path)
    with pytest.raises(AssemblyError, match="001.wav: sentence audio is missing"):
        measure_chapter(chapter, AssemblyOptions(), 0)


def test_true_peak_of_a_sentence_is_the_true_peak_of_its_speech(tmp_path):
    rng = np.random.default_rng(9)
    path = tmp_path / "p.wav"
    write_sentence_wav(path, 0.8 * speechlike_sentence(rng, 1.0))
    measure = measure_sentence(path, trim=False)
    with wave.open(str(path)) as wav:
        samples = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    assert measure.true_peak == pytest.approx(true_peak(samples))


def wav_samples(path) -> bytes:
    with wave.open(str(path)) as wav:
        return wav.readframes(wav.getnframes())

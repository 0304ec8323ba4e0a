"""Sentence WAVs: written atomically in the canonical layout, read back strictly."""

from __future__ import annotations

import wave

import numpy as np
import pytest
from pydub import AudioSegment

from pipeline.audio import write_sentence_wav
from pipeline.audio.wav_reading import read_sentence_audio, segment_samples
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE


def test_writes_16_bit_mono_24k_and_returns_seconds(tmp_path):
    waveform = (0.5 * np.sin(np.arange(SAMPLE_RATE * 3 // 2) / 10)).astype(np.float32)
    path = tmp_path / "deep" / "dir" / "s.wav"
    assert write_sentence_wav(path, waveform) == pytest.approx(1.5)
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, SAMPLE_RATE)
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    np.testing.assert_allclose(samples / 32767, waveform, atol=1 / 32767)
    assert [p.name for p in path.parent.iterdir()] == ["s.wav"]  # no temp file left behind


def test_overs_clip_instead_of_wrapping_and_nan_becomes_silence(tmp_path):
    path = tmp_path / "s.wav"
    write_sentence_wav(path, np.array([1.5, -1.5, 1.0, -1.0, np.nan], dtype=np.float32))
    assert segment_samples(read_sentence_audio(path)).tolist() == [32767, -32768, 32767, -32767, 0]


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "s.wav"
    write_sentence_wav(path, np.zeros(100, dtype=np.float32))
    before = path.read_bytes()

    def crash(self, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wave.Wave_write, "writeframes", crash)
    with pytest.raises(AssemblyError, match="disk is full"):
        write_sentence_wav(path, np.ones(100, dtype=np.float32))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.wav"]


def test_other_wav_layouts_are_converted(tmp_path):
    path = tmp_path / "stereo48k.wav"
    tone = (0.25 * np.sin(np.arange(48_000) * 2 * np.pi * 440 / 48_000) * 32767).astype("<i2")
    AudioSegment(np.repeat(tone, 2).tobytes(), sample_width=2, frame_rate=48_000, channels=2).export(
        path, format="wav"
    )
    segment = read_sentence_audio(path)
    assert (segment.channels, segment.frame_rate, segment.sample_width) == (1, SAMPLE_RATE, 2)
    assert len(segment_samples(segment)) == pytest.approx(SAMPLE_RATE, abs=2)


def test_missing_truncated_and_garbage_files_are_assembly_errors(tmp_path):
    with pytest.raises(AssemblyError, match="missing"):
        read_sentence_audio(tmp_path / "nope.wav")
    truncated = tmp_path / "truncated.wav"
    write_sentence_wav(truncated, np.zeros(SAMPLE_RATE, dtype=np.float32))
    truncated.write_bytes(truncated.read_bytes()[:1000])
    with pytest.raises(AssemblyError, match="truncated"):
        read_sentence_audio(truncated)
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 10)
    with pytest.raises(AssemblyError, match=str(garbage)):
        read_sentence_audio(garbage)


def write_sentence_wavs(items):
    """Every (path, waveform) through one SentenceWavWriter, as a GPU worker writes a batch;
    each file's duration, in order."""
    from pipeline.audio import SentenceWavWriter

    with SentenceWavWriter() as writer:
        for index, (path, waveform) in enumerate(items):
            writer.write(index, path, waveform)
        seconds = writer.seconds()
    return [seconds[index] for index in range(len(items))]


def test_a_batch_of_sentences_is_written_durably_from_several_threads(tmp_path, monkeypatch):
    import threading

    from pipeline.audio import wavio

    fsynced_by: list[str] = []
    real_fsync = wavio.os.fsync
    monkeypatch.setattr(wavio.os, "fsync",
                        lambda fd: (fsynced_by.append(threading.current_thread().name), real_fsync(fd)))
    rng = np.random.default_rng(0)
    items = [(tmp_path / f"ch{i % 3}" / f"{i:04d}.wav",
              rng.uniform(-0.5, 0.5, SAMPLE_RATE // 10 * (1 + i % 5)).astype(np.float32))
             for i in range(40)]
    seconds = write_sentence_wavs(items)
    assert seconds == [len(w) / SAMPLE_RATE for _, w in items]
    for path, waveform in items:
        samples = np.frombuffer(wave.open(str(path)).readframes(10**7), dtype="<i2")
        assert np.array_equal(samples, np.rint(waveform * 32767).astype("<i2"))
    assert len(fsynced_by) == len(items) + 3  # every file, and each of the 3 folders once (the renames)
    assert len(set(fsynced_by)) > 1  # from several threads at once
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_batch_write_that_cannot_create_a_file_names_it(tmp_path):
    (tmp_path / "blocked").write_text("a file where a chapter folder should be")
    bad = tmp_path / "blocked" / "0001.wav"
    with pytest.raises(AssemblyError, match="blocked/0001.wav"):
        write_sentence_wavs([(tmp_path / "ok.wav", np.zeros(100, np.float32)),
                             (bad, np.zeros(100, np.float32))])


def test_sentence_samples_read_the_same_whatever_the_layout_and_name_a_bad_file(tmp_path):
    """The quick read of the writer's own files and the general one (other rates and channels,
    extra chunks, truncation) give what ``read_sentence_audio`` gives, or its error."""
    from pipeline.audio.wav_reading import read_sentence_samples

    own = tmp_path / "own.wav"
    write_sentence_wav(own, np.random.default_rng(1).uniform(-0.8, 0.8, 4801).astype(np.float32))
    stereo = tmp_path / "stereo.wav"
    AudioSegment.from_mono_audiosegments(*[AudioSegment.silent(300, 44100).set_sample_width(2)] * 2
                                         ).export(stereo, format="wav")
    padded = tmp_path / "padded.wav"  # a chunk after the samples: not the writer's layout
    padded.write_bytes(own.read_bytes() + b"LIST\x04\x00\x00\x00abcd")
    for path in (own, stereo, padded):
        assert np.array_equal(read_sentence_samples(path), segment_samples(read_sentence_audio(path)))
    truncated = tmp_path / "truncated.wav"
    truncated.write_bytes(own.read_bytes()[:-100])
    for broken in (truncated, tmp_path / "missing.wav"):
        with pytest.raises(AssemblyError, match=broken.name):
            read_sentence_samples(broken)

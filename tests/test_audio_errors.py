"""Failures a user can meet: they get an AssemblyError naming the file and the fix, never a half file."""

from __future__ import annotations

import errno
import os
import wave

import pytest

from pipeline.audio import AssemblyOptions, SentenceAudio, assemble_audiobook, write_sentence_wav
from pipeline.bench.synthetic_audio import tone_book, tone_sentence
from pipeline.errors import AssemblyError
from pipeline.types import BookMetadata

METADATA = BookMetadata(title="Broken")


def leftovers(out_dir):
    return sorted(p.name for p in out_dir.iterdir()) if out_dir.exists() else []


@pytest.fixture
def chapters(tmp_path):
    return tone_book(tmp_path / "sentences", ["One", "Two"], body_sentences=2)


def test_missing_sentence_wav_names_the_file(tmp_path, chapters):
    missing = chapters[1].sentences[1].path
    missing.unlink()
    with pytest.raises(AssemblyError) as error:
        assemble_audiobook(
            chapters, METADATA, tmp_path / "out", tmp_path / "work", AssemblyOptions(formats=("m4b", "mp3"))
        )
    assert str(missing) in str(error.value) and "missing" in str(error.value)
    assert "run the job again" in str(error.value)
    assert leftovers(tmp_path / "out") == []


def test_truncated_sentence_wav_is_reported_as_truncated(tmp_path, chapters):
    damaged = chapters[0].sentences[2].path
    damaged.write_bytes(damaged.read_bytes()[:-5000])
    with pytest.raises(AssemblyError, match="truncated") as error:
        assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "work")
    assert str(damaged) in str(error.value)
    assert leftovers(tmp_path / "out") == []


def test_garbage_sentence_file_is_reported_as_corrupt(tmp_path, chapters):
    damaged = chapters[0].sentences[0].path
    damaged.write_bytes(b"this is not audio at all" * 40)
    with pytest.raises(AssemblyError, match="corrupt") as error:
        assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "work")
    assert str(damaged) in str(error.value)


def test_ffmpeg_failure_names_the_output_and_leaves_no_file(tmp_path, chapters):
    with pytest.raises(AssemblyError, match="ffmpeg could not") as error:
        assemble_audiobook(
            chapters,
            METADATA,
            tmp_path / "out",
            tmp_path / "work",
            AssemblyOptions(formats=("mp3",), bitrate="not-a-bitrate"),
        )
    assert str(tmp_path / "out") in str(error.value)
    assert leftovers(tmp_path / "out") == []


def test_disk_full_while_writing_the_m4b_says_so_and_keeps_the_old_file(tmp_path, chapters, monkeypatch):
    from pipeline.audio import m4b

    def full_disk(frames, out, at):
        os.pwrite(out.fileno(), b"half an m4b", at)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "Broken.m4b").write_bytes(b"the previous, complete audiobook")
    monkeypatch.setattr(m4b, "copy_frames", full_disk)
    with pytest.raises(AssemblyError) as error:
        assemble_audiobook(chapters, METADATA, out_dir, tmp_path / "work")
    assert str(out_dir / "Broken.m4b") in str(error.value)
    assert "disk is full" in str(error.value)
    assert leftovers(out_dir) == ["Broken.m4b"]
    assert (out_dir / "Broken.m4b").read_bytes() == b"the previous, complete audiobook"


def test_disk_full_while_stitching_says_so(tmp_path, chapters, monkeypatch):
    def full_disk(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(wave.Wave_write, "writeframesraw", full_disk)  # writeframes goes through it too
    # In this process: the full disk is simulated here, where helper processes would not see it.
    in_threads = AssemblyOptions(stitch_in_processes=False)
    with pytest.raises(AssemblyError, match="disk is full") as error:
        assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "work", in_threads)
    assert "chapter_" in str(error.value)
    assert leftovers(tmp_path / "out") == []
    assert [p.name for p in (tmp_path / "work").glob("*.wav")] == []


def test_chapter_without_sentences_is_rejected_by_name(tmp_path, chapters):
    empty = type(chapters[0])(2, "Empty Chapter", ())
    with pytest.raises(AssemblyError, match="Empty Chapter"):
        assemble_audiobook([*chapters, empty], METADATA, tmp_path / "out", tmp_path / "work")


def test_no_chapters_is_an_error(tmp_path):
    with pytest.raises(AssemblyError, match="no chapters"):
        assemble_audiobook([], METADATA, tmp_path / "out", tmp_path / "work")


def test_work_dir_must_differ_from_out_dir(tmp_path, chapters):
    with pytest.raises(AssemblyError, match="separate scratch"):
        assemble_audiobook(chapters, METADATA, tmp_path / "same", tmp_path / "same" / ".")


def test_unknown_format_is_an_error():
    with pytest.raises(AssemblyError, match="aiff"):
        AssemblyOptions(formats=("aiff",))


def test_formats_are_normalised():
    assert AssemblyOptions(formats=("MP3", "mp3", "m4b")).formats == ("mp3", "m4b")
    assert AssemblyOptions(formats="flac").formats == ("flac",)


def test_undecodable_cover_is_skipped_not_fatal(tmp_path, chapters, caplog):
    metadata = BookMetadata(title="Covered", cover=b"\xff\xd8 not really a jpeg", cover_mime="image/jpeg")
    report = assemble_audiobook(chapters, metadata, tmp_path / "out", tmp_path / "work")
    assert report.outputs[0].is_file()
    assert "cover" in caplog.text


def test_silent_sentence_is_left_out_with_a_warning(tmp_path, caplog):
    speech = tmp_path / "speech.wav"
    silent = tmp_path / "silent.wav"
    write_sentence_wav(speech, tone_sentence(seconds=0.5))
    write_sentence_wav(silent, tone_sentence(amplitude=0.0))
    chapter = type(tone_book(tmp_path / "x", ["x"], 0)[0])(
        0, "Hush", (SentenceAudio(speech, 0), SentenceAudio(silent, 0))
    )
    report = assemble_audiobook(
        [chapter], METADATA, tmp_path / "out", tmp_path / "work", AssemblyOptions(formats=("wav",))
    )
    assert str(silent) in caplog.text
    assert report.pause_seconds == 0.0


def test_a_chapter_wav_changed_after_stitching_is_not_encoded_as_noise(tmp_path):
    """The M4B encoder reads stretches of a stitched chapter WAV raw: a chapter WAV laid out any
    other way (here 16 kHz, replaced after stitching) is refused by name, not encoded as noise."""
    from pipeline.audio.aac import AacChapterPlan, AacPiece
    from pipeline.audio.export import encode_m4b_piece
    from pipeline.audio.levelling import Loudness
    from pipeline.audio.stitch import StitchedChapter

    wav_path = tmp_path / "chapter_0001.wav"
    with wave.open(str(wav_path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(b"\x00\x01" * 48_000)
    chapter = StitchedChapter(index=0, title="One", wav_path=wav_path, samples=48_000, trailing_silence=0)
    piece = AacPiece(chapter=0, start=0, samples=48_000, trailing_silence=0)
    with pytest.raises(AssemblyError) as error:
        encode_m4b_piece(chapter, piece, AacChapterPlan(48_000, 48), tmp_path / "one.aac", Loudness(), "64k")
    assert str(wav_path) in str(error.value) and "assemble the book again" in str(error.value)
    assert not (tmp_path / "one.aac").exists()

"""Chapters prepared ahead make the same audiobook as an assembly at the end: the M4B (marks,
length, loudness, its index first), the per-chapter files and the read-along audio; and a chapter
spoken again after it was prepared is prepared again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mutagen.mp4 import Atoms

from pipeline.audio import AssemblyOptions, ChapterAudio, assemble_audiobook, write_sentence_wav
from pipeline.audio.aac import FRAME
from pipeline.audio.ahead import BookAhead
from pipeline.audio.ffmpeg import measure_loudness, probe
from pipeline.bench.synthetic_audio import speechlike_sentence, tone_book
from pipeline.types import SAMPLE_RATE, BookMetadata
from tests.m4b_encodes import spy_m4b_encodes

METADATA = BookMetadata(title="Ahead", authors=("Ann Author",), language="en")
TITLES = ["One", "Two", "Three", "Four", "Five"]


def speechlike_book(directory: Path, levels: list[float]) -> list[ChapterAudio]:
    """One chapter per level (a gain on speech-like noise), four sentences each."""
    from pipeline.audio import SentenceAudio

    rng = np.random.default_rng(7)
    chapters = []
    for index, (title, level) in enumerate(zip(TITLES, levels, strict=False)):
        sentences = []
        for number in range(4):
            path = directory / f"{index:02d}_{number:02d}.wav"
            write_sentence_wav(path, level * speechlike_sentence(rng, seconds=2.0), durable=False)
            sentences.append(SentenceAudio(path=path, paragraph_index=-1 if number == 0 else number // 2))
        chapters.append(ChapterAudio(index=index, title=title, sentences=tuple(sentences)))
    return chapters


def prepared_ahead(chapters: list[ChapterAudio], work_dir: Path, options: AssemblyOptions,
                   stretches: list[tuple[int, int]], metadata: BookMetadata | None = METADATA) -> BookAhead:
    book = BookAhead(work_dir, options, chapters=len(chapters), metadata=metadata)
    for first, end in stretches:
        book.prepare(chapters[first:end])
    return book


def marks(path: Path) -> list[int]:
    return [round(float(m["start_time"]) * SAMPLE_RATE) for m in probe(path)["chapters"]]


def test_an_m4b_made_ahead_plays_as_the_one_made_at_the_end(tmp_path: Path) -> None:
    """Chapters of different levels, four of five prepared ahead in two stretches: the M4B has
    every chapter mark within one AAC frame of the one made at the end, the same length (within
    0.5 %) and loudness (within 0.5 LU), its index in front of its audio, written in one pass."""
    chapters = speechlike_book(tmp_path / "sentences", [0.2, 0.6, 0.35, 1.0, 0.5])
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500)
    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    book = prepared_ahead(chapters, tmp_path / "w2", options, [(0, 2), (2, 4)])
    ahead = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", tmp_path / "w2", options,
                               prepared=book.prepared)

    end_file, ahead_file = at_the_end.outputs[0], ahead.outputs[0]
    assert len(marks(ahead_file)) == 5
    assert max(abs(a - b) for a, b in zip(marks(end_file), marks(ahead_file), strict=True)) <= FRAME
    durations = [float(probe(path)["format"]["duration"]) for path in (end_file, ahead_file)]
    assert durations[1] == pytest.approx(durations[0], rel=0.005)
    loudness = [measure_loudness(path).integrated_lufs for path in (end_file, ahead_file)]
    assert loudness[1] == pytest.approx(loudness[0], abs=0.5)
    assert -18.6 <= loudness[1] <= -17.4
    assert index_first(ahead_file) and index_first(end_file)


def test_per_chapter_files_and_read_along_audio_made_ahead_are_moved_into_place_not_made_again(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """MP3 chapters and the read-along EPUB's audio of the chapters prepared ahead are the
    assembly's outputs as they were made (byte for byte what an assembly at the end writes);
    only the last chapter is encoded after the last sentence."""
    from pipeline.audio import assemble

    chapters = tone_book(tmp_path / "sentences", TITLES, body_sentences=3, seconds=0.3)
    options = AssemblyOptions(formats=("mp3", "epub"), threads=2)
    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    encoded: list[tuple[str, int]] = []
    real_file, real_readalong = assemble.encode_chapter_file, assemble.encode_readalong_audio
    monkeypatch.setattr(assemble, "encode_chapter_file", lambda chapter, fmt, *rest: encoded.append(
        (fmt, chapter.index)) or real_file(chapter, fmt, *rest))
    monkeypatch.setattr(assemble, "encode_readalong_audio", lambda chapter, *rest: encoded.append(
        ("readalong", chapter.index)) or real_readalong(chapter, *rest))

    book = prepared_ahead(chapters, tmp_path / "w2", options, [(0, 4)])
    ahead = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", tmp_path / "w2", options,
                               prepared=book.prepared)

    assert sorted(encoded) == [("mp3", 4), ("readalong", 4)]
    assert [p.name for p in ahead.outputs] == [p.name for p in at_the_end.outputs]
    for made_at_end, made_ahead in zip(at_the_end.outputs, ahead.outputs, strict=True):
        assert made_ahead.read_bytes() == made_at_end.read_bytes(), made_ahead.name
    assert len(ahead.readalong_audio) == 5 and all(p.is_file() for p in ahead.readalong_audio)
    assert not any(p.name.endswith(".partial") for p in (tmp_path / "ahead").iterdir())


def test_a_chapter_spoken_again_after_it_was_prepared_is_prepared_again(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A sentence of chapter two written again into the same file (a retried batch) after three
    chapters were prepared: the assembly keeps chapter one as prepared and assembles chapter two
    and every chapter after it anew, so the book has the new sentence (here: a longer one)."""

    chapters = tone_book(tmp_path / "sentences", TITLES[:4], body_sentences=2, seconds=0.3)
    options = AssemblyOptions(threads=2)
    book = prepared_ahead(chapters, tmp_path / "w", options, [(0, 3)], metadata=None)
    respoken = chapters[1].sentences[1].path
    write_sentence_wav(respoken, 0.3 * np.sin(np.arange(3 * SAMPLE_RATE, dtype=np.float32) / 10), durable=False)
    encoded = spy_m4b_encodes(monkeypatch)

    report = assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "w", options,
                                prepared=book.prepared)

    assert sorted(set(encoded)) == [1, 2, 3]
    assert report.chapters[1].seconds > report.chapters[2].seconds + 2.0  # the new, longer sentence is in


def test_when_the_speaking_ends_only_the_encodes_under_way_are_waited_for(tmp_path: Path) -> None:
    """Chapter 1 prepared; chapter 2 being laid out (its sentences being read) and chapter 3
    handed over when the book is all spoken: chapter 3 is never begun and chapter 2 is measured but
    neither stitched nor encoded (the assembly, on every core at full priority, does both sooner
    than the preparation would before it); the assembly takes chapter 1 as prepared and makes the
    book."""
    import threading
    import time

    from pipeline.audio.ahead_thread import AheadThread

    chapters = tone_book(tmp_path / "sentences", TITLES[:4], body_sentences=2, seconds=0.3)
    options = AssemblyOptions(threads=2)
    book = BookAhead(tmp_path / "w", options, chapters=4)
    started, release, loaded = threading.Event(), threading.Event(), []

    def load(first: int, end: int) -> list[ChapterAudio]:
        loaded.append((first, end))
        if first > 0:  # the second stretch: held until the speaking has ended
            started.set()
            release.wait(timeout=60)
        return chapters[first:end]

    thread = AheadThread(book, load, "test")
    first = thread.hand_over(1)
    assert first is not None
    first.result(timeout=120)
    deadline = time.monotonic() + 120
    while book.next_position < 1 and time.monotonic() < deadline:  # chapter 1 encoded
        time.sleep(0.01)
    thread.hand_over(2)
    assert started.wait(timeout=60)
    third = thread.hand_over(3)
    finished: list[list] = []
    finisher = threading.Thread(target=lambda: finished.append(thread.finish()))
    finisher.start()
    while third is not None and not third.cancelled() and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    finisher.join(timeout=120)

    assert third is not None and third.cancelled()
    assert loaded == [(0, 1), (1, 2)]
    assert [c.audio.index for c in finished[0]] == [0] and book.next_to_lay_out == 1
    assert not (tmp_path / "w" / "chapter_0002.wav").exists()
    report = assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "w", options, prepared=finished[0])
    assert len(report.chapters) == 4


def index_first(path: Path) -> bool:
    """Whether the M4B's index (moov) comes before its audio (mdat): it plays before it has all arrived."""
    with open(path, "rb") as handle:
        names = [atom.name for atom in Atoms(handle).atoms]
    return names.index(b"moov") < names.index(b"mdat")


def test_the_chapters_left_after_the_last_sentence_are_cut_for_every_core(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Three of four chapters prepared ahead: the last one, all that is left to encode, is cut into
    pieces sized from itself (four per core), not from the whole book (which left it one or two
    pieces, a core or two busy while the rest waited), and the M4B still has its marks in place."""
    from pipeline.audio import ahead

    chapters = tone_book(tmp_path / "sentences", TITLES[:4], body_sentences=11, seconds=0.3)
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500)
    monkeypatch.setattr(ahead, "MIN_PIECE_SECONDS", 0.5)
    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    encoded = spy_m4b_encodes(monkeypatch)  # the chapter of each piece the assembly itself encodes
    book = BookAhead(tmp_path / "w2", options, chapters=4, metadata=METADATA)
    book.prepare(chapters[:3])
    report = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", tmp_path / "w2", options,
                                prepared=book.prepared)

    assert set(encoded) == {3} and len(encoded) >= 2 * options.threads
    assert len(marks(report.outputs[0])) == 4
    assert max(abs(a - b) for a, b in zip(marks(at_the_end.outputs[0]), marks(report.outputs[0]), strict=True)) \
        <= FRAME

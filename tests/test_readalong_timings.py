"""Sentence timings from assembly's layout: in the chapter's audio, and in the M4B where each piece
of a chapter really plays (the AAC frames written); and the overlay clips made from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.audio.assembly_types import ChapterTimeline, M4bStretch, SpokenSpan
from pipeline.errors import AssemblyError
from pipeline.readalong.overlays import chapter_clips
from pipeline.readalong.timings import ChapterTiming, SentenceTiming, book_timings
from pipeline.types import Sentence

M4B = Path("/out/Book.m4b")


def _timeline() -> list[ChapterTimeline]:
    return [
        ChapterTimeline(0, 0, 1000, (SpokenSpan("a0", 0, 300), SpokenSpan("a1", 400, 900))),
        ChapterTimeline(1, 1000, 5000, (SpokenSpan("b0", 0, 500), SpokenSpan("b1", 600, 2000),
                                        SpokenSpan("b2", 3000, 4500))),
    ]


def _sentences() -> dict[str, Sentence]:
    names = ["a0", "a1", "b0", "b1", "b2"]
    return {name: Sentence(int(name[0] == "b"), int(name[1]), 0, f"text {name}") for name in names}


def test_without_an_m4b_the_book_is_the_chapters_back_to_back() -> None:
    timings = book_timings(_timeline(), [], {0: "One", 1: "Two"}, _sentences())
    second = timings.chapters[1]
    assert (second.title, second.book_start, second.m4b) == ("Two", 1000, "")
    assert [(s.start, s.end, s.book_start, s.book_end) for s in second.sentences] == [
        (0, 500, 1000, 1500), (600, 2000, 1600, 3000), (3000, 4500, 4000, 5500)]


def test_in_the_m4b_each_piece_plays_where_its_frames_put_it() -> None:
    # chapter 1 was cut before its third sentence; its pieces play 1024 and 3072 samples in
    stretches = [M4bStretch(M4B, 0, 0, 0), M4bStretch(M4B, 1, 0, 1024), M4bStretch(M4B, 1, 3000, 4096)]
    timings = book_timings(_timeline(), stretches, {}, _sentences())
    second = timings.chapters[1]
    assert (second.book_start, second.m4b) == (1024, "Book.m4b")
    assert [(s.book_start, s.book_end) for s in second.sentences] == [(1024, 1524), (1624, 3024), (4096, 5596)]
    assert timings.sentence_count == 5


def test_audio_of_no_known_sentence_is_an_error() -> None:
    with pytest.raises(AssemblyError, match="--fresh"):
        book_timings(_timeline(), [], {}, {"a0": _sentences()["a0"]})


def _timed(index: int, paragraph: int, start: int, end: int) -> SentenceTiming:
    return SentenceTiming(index, paragraph, "", None, start, end, start, end)


def test_clips_cover_the_chapter_and_unmarked_openings_go_with_what_follows() -> None:
    chapter = ChapterTiming(0, "Notes", 48_000, 0, "", (
        _timed(0, -1, 0, 4800),  # the title, not marked: heard in the first clip
        _timed(1, 0, 7200, 9600),  # 'Note 1.', not marked: opens the first note's clip
        _timed(2, 0, 12_000, 24_000),
        _timed(3, 1, 26_400, 28_800),  # 'Note 2.'
        _timed(4, 1, 31_200, 40_800),
    ))
    clips = chapter_clips(chapter, "a.m4a", {2: ("d.xhtml", "n1"), 4: ("d.xhtml", "n2")})
    assert [(clip.fragment, clip.begin, clip.end) for clip in clips] == [("n1", 0, 1100), ("n2", 1100, 2000)]

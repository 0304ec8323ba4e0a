"""Subtitles from the sentences' timings: parsed by libraries (srt, webvtt-py), their cues at the
recorded times to the millisecond, with the book's words as written, at most two lines each."""

from __future__ import annotations

from pathlib import Path

import pytest
import srt
import webvtt

from pipeline.readalong.subtitles import LINE_WIDTH, sentence_cues
from pipeline.readalong.timings import SentenceTiming
from pipeline.types import SAMPLE_RATE, WrittenSpan
from tests.books import SAMPLE_CHAPTERS, SAMPLE_ZH_CHAPTERS, write_epub, write_markdown
from tests.readalong_helpers import assemble


def ms(samples: int) -> int:
    return (samples * 1000 + SAMPLE_RATE // 2) // SAMPLE_RATE


def srt_cues(path: Path) -> list[tuple[int, int, str]]:
    return [
        (round(c.start.total_seconds() * 1000), round(c.end.total_seconds() * 1000), c.content)
        for c in srt.parse(path.read_text(encoding="utf-8"))
    ]


def vtt_cues(path: Path) -> list[tuple[int, int, str]]:
    def clock(value: str) -> int:
        hours, minutes, seconds = value.split(":")
        return round((int(hours) * 3600 + int(minutes) * 60 + float(seconds)) * 1000)

    return [(clock(c.start), clock(c.end), c.text) for c in webvtt.read(str(path))]


def check_cues(cues: list[tuple[int, int, str]], sentences: list[dict], book_time: bool) -> None:  # type: ignore[type-arg]
    """Every sentence's cues, in order: from its start to its end, its words as written."""
    remaining = list(cues)
    for sentence in sentences:
        start, end = (
            (sentence["book_start"], sentence["book_end"])
            if book_time
            else (sentence["start"], sentence["end"])
        )
        wanted = "".join((sentence["written"]["text"] if sentence["written"] else sentence["spoken"]).split())
        own, words = [], ""
        while "".join(words.split()) != wanted:
            own.append(remaining.pop(0))
            words += own[-1][2]
        assert own[0][0] == ms(start) and own[-1][1] == ms(end)
        assert all(a[1] <= b[0] for a, b in zip(own, own[1:]))
        assert all(len(cue[2].splitlines()) <= 2 for cue in own)
    assert remaining == []


@pytest.fixture(scope="module")
def m4b_book(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("m4b")
    return assemble(write_markdown(root / "book.md", "Subtitled", SAMPLE_CHAPTERS), root, "m4b,srt,vtt")


def test_one_file_per_format_for_the_m4b_on_its_timeline(m4b_book) -> None:  # type: ignore[no-untyped-def]
    out = {path.name for path in m4b_book.outputs}
    assert {"Subtitled.m4b", "Subtitled.srt", "Subtitled.vtt"} <= out
    sentences = [s for chapter in m4b_book.timings["chapters"] for s in chapter["sentences"]]
    assert m4b_book.timings["chapters"][1]["m4b"] == "Subtitled.m4b"
    folder = m4b_book.read_along.timings.parent
    check_cues(srt_cues(folder / "Subtitled.srt"), sentences, book_time=True)
    check_cues(vtt_cues(folder / "Subtitled.vtt"), sentences, book_time=True)


def test_long_sentences_are_split_at_clause_marks_into_cues_of_two_lines() -> None:
    words = (
        "And so they walked on through the fog, past the shuttered shops and the sleeping cab horses, "
        "along the embankment where the river ran black, while Holmes talked without pause of violins."
    )
    sentence = SentenceTiming(0, 0, "spoken", WrittenSpan(words, 0, len(words)), 0, 0, 24_000, 24_000 * 9)
    cues = sentence_cues(sentence, book_time=True)
    assert len(cues) > 2 and cues[0].start_ms == 1000 and cues[-1].end_ms == 9000
    assert all(a.end_ms == b.start_ms for a, b in zip(cues, cues[1:]))
    assert all(len(cue.lines) <= 2 and all(len(line) <= LINE_WIDTH for line in cue.lines) for cue in cues)
    assert " ".join(" ".join(cue.lines) for cue in cues) == words
    assert all(cue.lines[-1].endswith((",", ".")) for cue in cues)  # cut after clause marks


def test_one_file_per_chapter_beside_per_chapter_audio(tmp_path: Path) -> None:
    book = assemble(
        write_epub(tmp_path / "zh.epub", "中文书", SAMPLE_ZH_CHAPTERS, language="zh"), tmp_path, "mp3,srt"
    )
    names = sorted(path.name for path in book.outputs)
    assert names == [
        "01 - 第一章 开始.mp3",
        "01 - 第一章 开始.srt",
        "02 - 第二章 中英混合.mp3",
        "02 - 第二章 中英混合.srt",
    ]
    for chapter, name in zip(book.timings["chapters"], ["01 - 第一章 开始.srt", "02 - 第二章 中英混合.srt"]):
        check_cues(srt_cues(tmp_path / "out" / name), chapter["sentences"], book_time=False)
    assert "2024年3月5日" in (tmp_path / "out" / "01 - 第一章 开始.srt").read_text(encoding="utf-8")

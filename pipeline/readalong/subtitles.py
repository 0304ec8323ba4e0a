"""Subtitles (SRT, WebVTT) from the sentences' timings: a cue per sentence, with the book's words
as written, shown while the sentence is heard.

A sentence too long for two lines is split at its clause marks (else at spaces) into cues of at most
two lines each, its time shared among them by their length; the first cue starts and the last ends
exactly when the sentence does. Lines are at most ``LINE_WIDTH`` columns, a CJK character counting
two, as subtitle guidelines count them.

The files go beside the audio they time: one for the M4B (or each part of it), on its timeline;
one per chapter beside per-chapter audio; one on the chapters back to back when no audio file is
asked for beside them (a read-along EPUB carries its own timing).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.readalong.timings import BookTimings, ChapterTiming, SentenceTiming
from pipeline.types import SAMPLE_RATE

LINE_WIDTH = 42  # columns
LINES = 2
_CLAUSE = re.compile(r"(?<=[,;:，、；：.!?。！？…—])\s*")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Cue:
    start_ms: int
    end_ms: int
    lines: tuple[str, ...]


def ms(samples: int) -> int:
    """Samples as milliseconds, rounded half up (24 samples make one)."""
    return (samples * 1000 + SAMPLE_RATE // 2) // SAMPLE_RATE


def sentence_cues(sentence: SentenceTiming, book_time: bool) -> list[Cue]:
    """The cue(s) of one sentence, on the book's timeline or its chapter's."""
    start, end = (sentence.book_start, sentence.book_end) if book_time else (sentence.start, sentence.end)
    text = " ".join(sentence.shown.split())
    parts = _parts(text)
    start_ms, end_ms = ms(start), max(ms(end), ms(start) + 1)
    total = sum(_width(part) for part in parts) or 1
    cues: list[Cue] = []
    begin, done, pending = start_ms, 0, ""
    for number, part in enumerate(parts):
        done += _width(part)
        finish = end_ms if number == len(parts) - 1 else start_ms + (end_ms - start_ms) * done // total
        pending = f"{pending}{_glue(pending, part)}{part}" if pending else part
        if finish > begin:  # a part with no whole millisecond of its own goes with the next
            cues.append(Cue(begin, finish, _lines(pending)))
            begin, pending = finish, ""
    return cues


def srt(cues: Sequence[Cue]) -> str:
    blocks = [
        f"{number}\n{_clock(cue.start_ms, ',')} --> {_clock(cue.end_ms, ',')}\n" + "\n".join(cue.lines)
        for number, cue in enumerate(cues, start=1)
    ]
    return "\n\n".join(blocks) + "\n"


def vtt(cues: Sequence[Cue]) -> str:
    blocks = [
        f"{_clock(cue.start_ms, '.')} --> {_clock(cue.end_ms, '.')}\n"
        + "\n".join(_vtt_text(line) for line in cue.lines)
        for cue in cues
    ]
    return "WEBVTT\n\n" + "\n\n".join(blocks) + "\n"


def subtitle_files(
    timings: BookTimings, formats: Sequence[str], chapter_names: Sequence[str], book_name: str
) -> dict[str, str]:
    """The subtitle files to write, as file name -> text.

    Args:
        timings: the book's.
        formats: 'srt' and/or 'vtt'.
        chapter_names: the stems of the per-chapter audio files ([] when none is written).
        book_name: the stem for one file on the chapters back to back (used when there is no M4B
            and no per-chapter audio).
    """
    groups: list[tuple[str, list[ChapterTiming], bool]] = []
    m4bs = list(dict.fromkeys(chapter.m4b for chapter in timings.chapters if chapter.m4b))
    for m4b in m4bs:
        groups.append((Path(m4b).stem, [c for c in timings.chapters if c.m4b == m4b], True))
    groups += [
        (name, [chapter], False) for name, chapter in zip(chapter_names, timings.chapters, strict=False)
    ]
    if not groups:
        groups.append((book_name, list(timings.chapters), True))
    files = {}
    for stem, chapters, book_time in groups:
        cues = [
            cue
            for chapter in chapters
            for sentence in chapter.sentences
            for cue in sentence_cues(sentence, book_time)
        ]
        for subtitle_format in formats:
            files[f"{stem}.{subtitle_format}"] = srt(cues) if subtitle_format == "srt" else vtt(cues)
    return files


def _parts(text: str) -> list[str]:
    """``text`` cut into pieces of at most two lines, at clause marks where it has them."""
    if _width(text) <= LINE_WIDTH * LINES:
        return [text]
    pieces: list[str] = []
    for clause in (c for c in _CLAUSE.split(text) if c):
        for chunk in _fitting(clause, LINE_WIDTH * LINES):
            joined = f"{pieces[-1]}{_glue(pieces[-1], chunk)}{chunk}" if pieces else chunk
            if pieces and _width(joined) <= LINE_WIDTH * LINES:
                pieces[-1] = joined
            else:
                pieces.append(chunk)
    return pieces


def _fitting(text: str, width: int) -> list[str]:
    """``text`` cut at spaces (else between characters) into pieces of at most ``width`` columns."""
    pieces, current = [], ""
    for word in _words(text):
        candidate = f"{current}{_glue(current, word)}{word}" if current else word
        if current and _width(candidate) > width:
            pieces.append(current)
            current = word
        else:
            current = candidate
        while _width(current) > width:  # one word too long for the width: cut it
            cut = _cut_at_width(current, width)
            pieces.append(current[:cut])
            current = current[cut:]
    if current:
        pieces.append(current)
    return pieces


def _lines(text: str) -> tuple[str, ...]:
    """``text`` (at most two lines' worth) broken into lines of at most ``LINE_WIDTH`` columns."""
    if _width(text) <= LINE_WIDTH:
        return (text,)
    lines = _fitting(text, LINE_WIDTH)
    return (lines[0], " ".join(lines[1:])) if len(lines) > 2 else tuple(lines)


def _words(text: str) -> list[str]:
    """Words, each CJK character one of them (Chinese is broken between any two characters)."""
    words = []
    for token in _SPACE.split(text):
        run = ""
        for char in token:
            if _wide(char):
                if run:
                    words.append(run)
                    run = ""
                words.append(char)
            else:
                run += char
        if run:
            words.append(run)
    return words


def _glue(left: str, right: str) -> str:
    return "" if (left and _wide(left[-1])) or (right and _wide(right[0])) else " "


def _cut_at_width(text: str, width: int) -> int:
    used = 0
    for index, char in enumerate(text):
        used += 2 if _wide(char) else 1
        if used > width:
            return max(index, 1)
    return len(text)


def _width(text: str) -> int:
    return sum(2 if _wide(char) else 1 for char in text)


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _clock(milliseconds: int, separator: str) -> str:
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, rest = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{rest:03d}"


def _vtt_text(line: str) -> str:
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

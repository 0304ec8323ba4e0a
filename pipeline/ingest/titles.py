"""Chapter titles: the one a player shows, and the announcement a listener hears.

A nested table of contents gives each chapter a path of titles ("SECTION IV", "Hans Andersen",
"A FOUR-LEAVED CLOVER", "I. The Rabbi and the Diadem"). A player's chapter list has room for one: the
chapter's own, with its parents put before it only where two chapters would otherwise share a title
("Part One — Chapter 1", "Part Two — Chapter 1"). The listener, who sees no list, hears the parents
too as the book enters them: the first chapter of a part is announced "SECTION IV. Hans Andersen. A
FOUR-LEAVED CLOVER. I. The Rabbi and the Diadem", the next one by its own title.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pipeline.ingest.chapters import TITLE_SEPARATOR, RawChapter, title_key

_ENDS_A_SENTENCE = (".", "!", "?", "。", "！", "？", "…", ":", "：")


@dataclass(frozen=True)
class ChapterTitle:
    shown: str  # what a player's chapter list shows
    announced: str  # what is said first; '' when it is the title shown


def chapter_titles(chapters: list[RawChapter]) -> list[ChapterTitle]:
    """The title and announcement of each chapter, from their paths (or their titles)."""
    paths = [chapter.path or ((chapter.title,) if chapter.title else ()) for chapter in chapters]
    shown = _distinct_titles(paths)
    titles: list[ChapterTitle] = []
    previous: tuple[str, ...] = ()
    for path, title in zip(paths, shown, strict=True):
        shared = _shared_prefix(previous, path)
        entered = path[shared:-1]  # parents the listener enters here
        announced = _spoken(entered + path[-1:]) if entered else ""
        titles.append(ChapterTitle(title, "" if announced == title else announced))
        previous = path
    return titles


def _distinct_titles(paths: list[tuple[str, ...]]) -> list[str]:
    """Each path's last title; with as many parents before it as it takes to tell it from the others."""
    depth = [1] * len(paths)
    for _ in range(max((len(path) for path in paths), default=0)):
        shown = [_tail(path, levels) for path, levels in zip(paths, depth, strict=True)]
        counts = Counter(title_key(title) for title in shown)
        clashing = [
            index
            for index, title in enumerate(shown)
            if counts[title_key(title)] > 1 and depth[index] < len(paths[index])
        ]
        if not clashing:
            break
        for index in clashing:
            depth[index] += 1
    return [_tail(path, levels) for path, levels in zip(paths, depth, strict=True)]


def _tail(path: tuple[str, ...], levels: int) -> str:
    return TITLE_SEPARATOR.join(path[-levels:]) if path else ""


def _shared_prefix(previous: tuple[str, ...], path: tuple[str, ...]) -> int:
    """How many of ``path``'s parents the listener is already in (heard with an earlier chapter)."""
    shared = 0
    for before, now in zip(previous, path[:-1]):
        if title_key(before) != title_key(now):
            break
        shared += 1
    return shared


def _spoken(titles: tuple[str, ...]) -> str:
    """Titles said one after another, each closed as a sentence: 'Part Two. Chapter 1', '第一卷。第1章'."""
    spoken = ""
    for title in titles:
        if spoken.endswith(_ENDS_A_SENTENCE):
            spoken += " "
        elif spoken:
            spoken += "。" if "\u4e00" <= spoken[-1] <= "\u9fff" else ". "
        spoken += title
    return spoken

"""Which chapters a job reads: ``--chapters 1-3,7,12-`` by number, ``--chapters Loomings`` by title.

Numbers count from 1 in reading order, as ``tts-jobs inspect`` lists the chapters (with the same
reading options: a Notes chapter placed at the end is one of them). A value is a list of numbers
and ranges (``12-``: to the last; ``-3``: from the first), or else a title: the chapter whose title
it is (case and spacing aside), else the one chapter whose title holds it. Several values add up.
The chapters read keep their place and number in the book: titles, marks and each sentence's
voice seed are those of the whole book's run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.errors import BookError, OptionError
from pipeline.types import Chapter

_NUMBERS = re.compile(r"^\s*(?:\d+\s*(?:-\s*\d*)?|-\s*\d+)(?:\s*,\s*(?:\d+\s*(?:-\s*\d*)?|-\s*\d+))*\s*$")
_LISTED = "see the chapters and their numbers with `tts-jobs inspect BOOK`"


def check_selection(values: Sequence[str]) -> None:
    """Raises OptionError for a value that names no chapter of any book (0, a range backwards, '')."""
    for value in values:
        if not value.strip():
            raise OptionError("--chapters '': give numbers (1-3,7,12-) or a chapter's title")
        if _NUMBERS.match(value):
            _ranges(value)


def select_chapters(chapters: Sequence[Chapter], values: Sequence[str], path: object) -> list[Chapter]:
    """The chapters ``values`` name, in reading order (all of them for no values).

    Raises:
        BookError: a number past the book's last chapter, a title no chapter has, or one that
            several chapters' titles hold (each naming the chapters and how to choose).
    """
    if not values:
        return list(chapters)
    chosen: set[int] = set()
    for value in values:
        if _NUMBERS.match(value):
            chosen |= _numbered(chapters, value, path)
        else:
            chosen.add(_titled(chapters, value, path))
    return [chapter for number, chapter in enumerate(chapters, start=1) if number in chosen]


def _ranges(value: str) -> list[tuple[int, int | None]]:
    ranges: list[tuple[int, int | None]] = []
    for part in value.split(","):
        low, dash, high = (piece.strip() for piece in part.partition("-"))
        first, last = int(low or 1), (int(high) if high else None) if dash else int(low)
        if first < 1 or (last is not None and last < first):
            raise OptionError(f"--chapters {value}: {part.strip()!r} names no chapter (chapters count "
                              "from 1, and a range goes from the lower number to the higher)")
        ranges.append((first, last))
    return ranges


def _numbered(chapters: Sequence[Chapter], value: str, path: object) -> set[int]:
    count = len(chapters)
    numbers: set[int] = set()
    for first, last in _ranges(value):
        if first > count or (last is not None and last > count):
            raise BookError(path, f"--chapters {value} goes past the last chapter: it has {count} "
                                  f"(1-{count})", _LISTED)
        numbers.update(range(first, (last or count) + 1))
    return numbers


def _titled(chapters: Sequence[Chapter], value: str, path: object) -> int:
    wanted = _folded(value)
    exact = [n for n, chapter in enumerate(chapters, start=1) if _folded(chapter.title) == wanted]
    found = exact or [n for n, chapter in enumerate(chapters, start=1) if wanted in _folded(chapter.title)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BookError(path, f"--chapters {value!r}: no chapter is titled so",
                        f"{_LISTED}, or give a part of one title")
    named = ", ".join(f"{n} {chapters[n - 1].title!r}" for n in found[:6])
    named += " ..." if len(found) > 6 else ""
    raise BookError(path, f"--chapters {value!r} fits {len(found)} chapters: {named}",
                    "give their numbers, or more of the title")


def _folded(title: str) -> str:
    return " ".join(title.casefold().split())

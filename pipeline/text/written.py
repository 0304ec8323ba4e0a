"""Each spoken sentence's words as the book writes them: the span of the written paragraph that the
sentence was normalised from ('In 1998.' for 'In nineteen ninety-eight.').

Normalisation reads numbers, symbols and abbreviations aloud, folds letters and drops marks, and the
sentence cutter works on its output; so a sentence's span is found afterwards, by aligning the letters
both texts share: Latin letters folded as normalisation folds them (case, accents, full width) and CJK
ideographs. A cut between two sentences falls in the written paragraph between the last letter
matched before it and the first one matched after it: after the sentence (or clause) mark found there
and the closing quotes that follow it, else at a space, else before the opening marks. So '1998.'
stays with the sentence that says 'nineteen ninety-eight', and quotation marks stay with the words
they close or open. A sentence of none of the book's letters (a note's 'Note 1.', a part announced
before a chapter) gets an empty span.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from pipeline.text.marks import CJK_RANGE

_NOT_SPOKEN_LETTER = re.compile(f"[^A-Za-z{CJK_RANGE}]+")
_ASCII_LETTERS = re.compile("[A-Za-z]+")
_CJK_LOW, _CJK_HIGH = "\u4e00", "\u9fff"
_RESYNC = 4  # letters that must agree again after the texts part
_WINDOW = 96  # how far apart (in letters) the texts may be found again
_MARKS = ".!?;:,…。！？；：，、"
_WIDE_MARKS = "。！？；：，、…"  # a cut may follow these with no space
_CLOSING = "\"'”’»」』）)]}›〉》】〕"
_ONLY_OPENING = "“‘«「『（([{‹〈《【〔"
# A run of marks, the closing quotes after it, then a space or the gap's end (a wide mark: anything)
_MARK_THEN_BREAK = re.compile(
    rf"[{re.escape(_MARKS)}]+[{re.escape(_CLOSING)}]*(?=\s|$)|[{_WIDE_MARKS}]+[{re.escape(_CLOSING)}]*"
)
_SPACE = re.compile(r"\s+")


def written_spans(written: str, pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Where each of ``pieces`` stands in ``written``.

    Args:
        written: a paragraph as the book writes it.
        pieces: the sentences cut from its normalised text, in order.

    Returns:
        One ``(start, end)`` per piece: in order, not overlapping, without the spaces between them;
        together they cover ``written`` but for those spaces. ``start == end`` for a piece of none of
        the book's letters.
    """
    if not pieces:
        return []
    spoken, bounds = _spoken_letters(pieces)
    letters, positions = written_letters(written)
    match = _align(spoken, letters)
    matched = [any(index >= 0 for index in match[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
    cuts = [0]
    for number, bound in enumerate(bounds[1:-1]):
        before = _matched_before(match, bound)
        after = _matched_after(match, bound)
        low = max(positions[before] + 1 if before >= 0 else 0, cuts[-1])
        high = max(positions[after] if after >= 0 else len(written), low)
        if not matched[number] and not matched[number + 1]:
            cuts.append(low)  # what stands here belongs to whichever comes closer to the book's words
            continue
        trailing_words = bound - 1 - _last_matched_index(match, bound)
        cuts.append(max(_cut(written, low, high, pieces[number], trailing_words > 0), cuts[-1]))
    cuts.append(len(written))
    return [_stripped(written, start, end) for start, end in zip(cuts, cuts[1:])]


def written_letters(text: str) -> tuple[str, list[int]]:
    """The letters of ``text`` folded as normalisation folds them, and the index of each in ``text``
    (a character that folds into several letters, as 'ﬁ' does, gives each its own index)."""
    if text.isascii():
        positions: list[int] = []
        runs = []
        for run in _ASCII_LETTERS.finditer(text):
            positions.extend(range(run.start(), run.end()))
            runs.append(run.group())
        return "".join(runs).lower(), positions
    letters: list[str] = []
    positions = []
    for index, char in enumerate(text):
        folded = _fold(char)
        if folded:
            letters.append(folded)
            positions.extend([index] * len(folded))
    return "".join(letters), positions


@lru_cache(maxsize=8192)
def _fold(char: str) -> str:
    if char.isascii():
        return char.lower() if char.isalpha() else ""
    if _CJK_LOW <= char <= _CJK_HIGH:
        return char
    return "".join(
        part.lower() if part.isascii() else part
        for part in unicodedata.normalize("NFKD", char)
        if (part.isascii() and part.isalpha()) or _CJK_LOW <= part <= _CJK_HIGH
    )


def _spoken_letters(pieces: Sequence[str]) -> tuple[str, list[int]]:
    """The pieces' letters, joined, and where each piece's letters begin (and the last ends)."""
    letters = [_NOT_SPOKEN_LETTER.sub("", piece).lower() for piece in pieces]
    bounds = [0]
    for part in letters:
        bounds.append(bounds[-1] + len(part))
    return "".join(letters), bounds


def _align(a: str, b: str) -> list[int]:
    """For each letter of ``a``, the index of the letter of ``b`` it is matched with (-1: none).

    Runs that agree are matched whole; where the texts part (words read aloud for a number, letters
    of a dropped script), the nearest place where ``_RESYNC`` letters agree again is looked for
    within ``_WINDOW`` letters of each, so the cost stays linear in the length of the texts.
    """
    match = [-1] * len(a)
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            run = _common_run(a, b, i, j)
            match[i : i + run] = range(j, j + run)
            i, j = i + run, j + run
            continue
        found = _resync(a, b, i, j)
        if found is None:
            i += 1  # a letter of words the reader supplies
            continue
        i, j = found
    return match


def _common_run(a: str, b: str, i: int, j: int) -> int:
    """How many letters agree from ``a[i]`` and ``b[j]`` on (compared a block at a time)."""
    limit = min(len(a) - i, len(b) - j)
    run = 0
    block = 64
    while run < limit:
        size = min(block, limit - run)
        if a[i + run : i + run + size] == b[j + run : j + run + size]:
            run += size
            continue
        while a[i + run] == b[j + run]:
            run += 1
        return run
    return run


def _resync(a: str, b: str, i: int, j: int) -> tuple[int, int] | None:
    """The nearest ``(i', j')`` past a parting where the texts agree again, or None."""
    best: tuple[int, int] | None = None
    best_cost = 2 * _WINDOW + 1
    for skip_a in range(min(_WINDOW, len(a) - i)):
        if skip_a >= best_cost:
            break
        size = min(_RESYNC, len(a) - i - skip_a, len(b) - j)
        if size <= 0:
            break
        probe = a[i + skip_a : i + skip_a + size]
        reach = min(_WINDOW, best_cost - skip_a)
        found = b.find(probe, j, j + reach + size)
        if found >= 0 and skip_a + found - j < best_cost:
            best, best_cost = (i + skip_a, found), skip_a + found - j
    return best


def _matched_before(match: list[int], bound: int) -> int:
    """The index in ``b`` of the last letter matched before ``bound`` in ``a`` (-1: none)."""
    index = _last_matched_index(match, bound)
    return match[index] if index >= 0 else -1


def _last_matched_index(match: list[int], bound: int) -> int:
    for index in range(bound - 1, -1, -1):
        if match[index] >= 0:
            return index
    return -1


def _matched_after(match: list[int], bound: int) -> int:
    for index in range(bound, len(match)):
        if match[index] >= 0:
            return match[index]
    return -1


def _cut(text: str, low: int, high: int, left: str, left_has_more: bool) -> int:
    """Where the cut after sentence ``left`` falls in ``text[low:high]`` (the stretch between the
    letters matched on either side; ``left_has_more``: ``left`` ends with words not matched, such
    as a number read aloud, whose written form is in that stretch)."""
    if low >= high:
        return low
    gap = text[low:high]
    if left.rstrip()[-1:] in _MARKS:
        mark = _MARK_THEN_BREAK.search(gap)
        if mark:
            return low + mark.end()
    spaces = list(_SPACE.finditer(gap))
    if spaces:
        return low + (spaces[-1] if left_has_more else spaces[0]).start()
    end = len(gap)
    while end > 0 and gap[end - 1] in _ONLY_OPENING:  # a straight quote, both, stays with the left
        end -= 1
    return low + end


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end

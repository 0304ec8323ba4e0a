"""Cutting normalised text into sentences, and sentences into pieces that fit the voice model.

Input is text already normalised for ChatTTS (see ``normalize``): Chinese characters, English letters,
spaces and ``，。！？、；：,.!?;:'``. Cuts only ever fall *between* characters, so the pieces joined
again give back the text exactly (less the spaces at the cuts).

- Chinese sentences end at ``。！？；`` (an ellipsis has become ``。`` by then).
- English sentences end at ``.!?`` followed by a space and a capital letter or a Chinese character,
  except after an abbreviation (``Mr.``, ``e.g.``, ``U.S.``) or an initial (``J. R. R. Tolkien``).
- A sentence longer than the limit is cut at clause punctuation (``，、：；,;:``) into pieces of
  similar length, at spaces if it has none, and in the last resort between characters.
- A tiny sentence (``"Yes."``) is merged with its neighbour when the two fit the limit together.
"""

from __future__ import annotations

import math
import re

from pipeline.text.abbreviations import NOT_SENTENCE_ENDS, lookbehinds
from pipeline.text.marks import CJK_RANGE, SEPARATOR

_CJK_CHAR = re.compile(f"[{CJK_RANGE}]")
# Where a sentence over the limit may be cut: after a run of clause or sentence marks.
_CLAUSE_END = re.compile(r"[，、：；,;:]+|[。！？.!?]+")
# A period that does not close an abbreviation ("Mr."), an initial ("J.") or a dotted word ("U.S."),
# written as lookbehinds after the period so the regex engine decides it without calling back here.
# Python needs fixed-width lookbehinds: one per word length, each an alternation of that length's words.
_NOT_AFTER_ABBREVIATION = (
    lookbehinds(sorted(NOT_SENTENCE_ENDS), r"(?<!(?i:\b(?:{}))\.)", joiner="")
    + r"(?<!\b[A-Z]\.)(?<!\.[A-Za-z]\.)"
)
# What follows a Latin sentence end: a space and a capital or Chinese, Chinese, or the paragraph's end.
_LATIN_END = rf"(?: (?=[A-Z{CJK_RANGE}'])|(?=[{CJK_RANGE}])| ?(?={SEPARATOR}|$))"
# Sentence ends, or the separator between paragraphs joined for speed (always an end).
_BOUNDARY = re.compile(
    rf"[。！？；]+ ?|[!?][.!?]*{_LATIN_END}|\.{_NOT_AFTER_ABBREVIATION}[.!?]*{_LATIN_END}|{SEPARATOR}"
)


def cost(text: str, cjk_weight: float) -> float:
    """Length in Latin-character units: a CJK character (or CJK mark) weighs ``cjk_weight``.

    Normalised text holds only ASCII and three-byte UTF-8 characters (CJK ideographs and marks), so
    the byte count tells how many are wide, far faster than matching them.
    """
    if text.isascii():
        return len(text)
    wide = (len(text.encode("utf-8", "surrogatepass")) - len(text)) // 2
    return (len(text) - wide) + wide * cjk_weight


def split_long(text: str, limit: float, cjk_weight: float) -> list[str]:
    """Cut a sentence over ``limit`` into pieces of similar length at the gentlest breaks it has.

    Each cut goes at the clause mark nearest the ideal (equal-share) position that keeps the piece
    within the limit; failing that at a space; failing that between two characters.
    """
    remaining = cost(text, cjk_weight)
    if remaining <= limit:
        return [text]
    pieces: list[str] = []
    start = 0
    while remaining > limit:
        furthest = _furthest_end(text, start, limit, cjk_weight)
        # Aim for equal shares, but never further than a few limits ahead: a 10 MB paragraph without a
        # single mark must still cost linear time.
        shares = math.ceil(remaining / limit)
        ideal = start + min(len(text) - start, 3 * int(limit) + 3) / min(shares, 3)
        lowest = int(start + (ideal - start) / 3) + 1  # no crumbs: a cut at least a third of the way
        cut = (
            _clause_break(text, lowest, furthest, ideal)
            or _space_break(text, lowest, furthest, ideal)
            or furthest
        )
        piece = text[start:cut]
        pieces.append(piece)
        remaining -= cost(piece, cjk_weight)
        start = cut
    pieces.append(text[start:])
    return pieces


def _clause_break(text: str, lowest: int, furthest: int, ideal: float) -> int:
    """The end of the clause mark in [lowest, furthest] nearest ``ideal``, or 0."""
    best, best_distance = 0, math.inf
    for match in _CLAUSE_END.finditer(text, max(lowest - 1, 0), furthest):
        end = match.end()
        if lowest <= end <= furthest and end < len(text) and abs(end - ideal) < best_distance:
            best, best_distance = end, abs(end - ideal)
    return best


def _space_break(text: str, lowest: int, furthest: int, ideal: float) -> int:
    """Just after the space in [lowest, furthest] nearest ``ideal``, or 0."""
    middle = int(ideal)
    before = text.rfind(" ", lowest, min(middle, furthest)) + 1  # 0 when there is none
    after = text.find(" ", middle, furthest) + 1
    if before and after:
        return before if ideal - before <= after - ideal else after
    return before or after


def _furthest_end(text: str, start: int, limit: float, cjk_weight: float) -> int:
    """The largest end such that text[start:end] fits the limit (at least one character)."""
    if text.isascii():
        return min(len(text), start + max(1, int(limit)))
    low, high = start + 1, min(len(text), start + max(1, int(limit)))  # every character costs at least 1
    while low < high:
        middle = (low + high + 1) // 2
        if cost(text[start:middle], cjk_weight) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def merge_short(sentences: list[str], minimum: float, limit: float, cjk_weight: float) -> list[str]:
    """Merge sentences under ``minimum`` into the next one (the previous one at the end) if they fit."""
    merged: list[str] = []
    carry = ""
    for sentence in sentences:
        if carry:
            joined = _join(carry, sentence)
            if cost(joined, cjk_weight) <= limit:
                sentence, carry = joined, ""
            else:
                merged.append(carry)
                carry = ""
        if cost(sentence, cjk_weight) < minimum:
            carry = sentence
        else:
            merged.append(sentence)
    if carry:
        if merged and cost(_join(merged[-1], carry), cjk_weight) <= limit:
            merged[-1] = _join(merged[-1], carry)
        else:
            merged.append(carry)
    return merged


def _join(left: str, right: str) -> str:
    cjk_left = _CJK_CHAR.match(left[-1:]) or left.endswith(("。", "！", "？", "；", "，", "：", "、"))
    if cjk_left and (_CJK_CHAR.match(right[:1]) or not right[:1].isascii()):
        return left + right  # Chinese needs no space between sentences
    return f"{left} {right}"


def split_paragraphs(
    paragraphs: list[str], limit: float, minimum: float, cjk_weight: float
) -> list[list[str]]:
    """Sentences of each normalised paragraph, found in one pass over them all.

    Args:
        paragraphs: normalised paragraphs (they must not contain ``SEPARATOR``).
        limit: the longest sentence, in Latin-character units.
        minimum: shorter sentences are merged with a neighbour of the same paragraph when they fit.
        cjk_weight: the cost of one CJK character in Latin-character units.
    """
    text = SEPARATOR.join(paragraphs)
    found: list[list[str]] = [[] for _ in paragraphs]
    sentences = found[0]
    index = 0
    start = 0
    short = limit / max(cjk_weight, 1.0)  # a piece this long fits whatever its script
    for match in _BOUNDARY.finditer(text):
        token = match.group(0)
        end = match.end()
        piece = text[start : match.start() if token == SEPARATOR else end].strip()
        if piece:
            if len(piece) <= short or len(piece) <= limit and piece.isascii():  # the common case, inline
                sentences.append(piece)
            else:
                _add(piece, sentences, limit, cjk_weight)
        start = end
        if token == SEPARATOR:
            index += 1
            sentences = found[index]
    _add(text[start:], sentences, limit, cjk_weight)
    return [
        merge_short(sentences, minimum, limit, cjk_weight) if _may_merge(sentences, minimum) else sentences
        for sentences in found
    ]


def _may_merge(sentences: list[str], minimum: float) -> bool:
    # cost >= len whatever the script, so sentences all at least ``minimum`` long have nothing to merge
    return len(sentences) > 1 and min(map(len, sentences)) < minimum


def _add(piece: str, sentences: list[str], limit: float, cjk_weight: float) -> None:
    piece = piece.strip()
    if not piece:
        return
    if len(piece) * max(cjk_weight, 1.0) <= limit or cost(piece, cjk_weight) <= limit:
        sentences.append(piece)
    else:
        sentences.extend(part for part in (p.strip() for p in split_long(piece, limit, cjk_weight)) if part)

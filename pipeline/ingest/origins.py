"""Where each character of a block of text comes from in its document: the element whose text (or
tail) holds it, and its index there. A read-along edition marks sentences in the book's own XHTML
from these (``pipeline.readalong``).

A block's text is its parts joined with white space folded (runs become one space, none around a
line break, none at the ends); so the folded text is matched back to the parts' own characters,
space runs to space runs. Words the reader supplies (a cell separator, 'formula') come from nowhere.
"""

from __future__ import annotations

from lxml import etree

Origin = tuple[etree._Element, bool, int]  # (element, in its tail rather than its text, index)
Part = tuple[etree._Element, bool, str]  # (element, tail, the raw text it holds)

_SPACES = frozenset(" \t\n\r\f")


def block_origins(
    parts: list[str], sources: list[Part | None], text: str, formula: str = "", word: str = ""
) -> list[Origin | None]:
    """The origin of each character of ``text``, the block cut from ``parts``.

    Args:
        parts: the pieces of text the block was joined from (inner space runs already folded).
        sources: for each part, the element text it is (None for the reader's own).
        text: the block's text.
        formula, word: the placeholder of a formula without words, and the word that replaced it.
    """
    chars: list[str] = []
    origins: list[Origin | None] = []
    for part, source in zip(parts, sources, strict=True):
        if part == formula and word:
            part = f" {word} "
        chars.extend(part)
        origins.extend(_part_origins(part, source))
    found: list[Origin | None] = []
    k = 0
    for char in text:
        if char in _SPACES:
            if k < len(chars) and chars[k] in _SPACES:
                found.append(origins[k])
                while k < len(chars) and chars[k] in _SPACES:
                    k += 1
            else:
                found.append(None)
            continue
        while k < len(chars) and chars[k] in _SPACES:
            k += 1
        if k < len(chars) and chars[k] == char:
            found.append(origins[k])
            k += 1
        else:
            found.append(None)
    return found


def _part_origins(part: str, source: Part | None) -> list[Origin | None]:
    if source is None:
        return [None] * len(part)
    element, tail, raw = source
    if part == raw:
        return [(element, tail, index) for index in range(len(raw))]
    origins: list[Origin | None] = []
    k = 0
    # ``part`` is ``raw`` with each run of white space folded into one space, spaces put between the
    # words of an identifier ('get Element'), and those of letter-spaced words taken out ('This')
    for char in part:
        if char == " " and not (k < len(raw) and raw[k] in _SPACES):
            origins.append(None)  # a space the reader put in
            continue
        if char != " ":
            while k < len(raw) and raw[k] != char and raw[k] in _SPACES:
                k += 1  # a space the reader took out
        origins.append((element, tail, k) if k < len(raw) else None)
        if char == " ":
            while k < len(raw) and raw[k] in _SPACES:
                k += 1
        else:
            k += 1
    return origins

"""Putting the spoken words of a matched number, numeral or symbol in its place."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.text.language import DefaultLanguage, neighbour_language

Reader = Callable[[re.Match[str], str], str]  # (match, language) -> its words; the match itself if none


def read_match(match: re.Match[str], reader: Reader, default: DefaultLanguage, forced: str) -> str:
    """The words ``reader`` gives for ``match`` in its language, spaced from the letters beside it."""
    language = forced or neighbour_language(match.string, match.start(), match.end(), default)
    spoken = reader(match, language)
    if spoken == match.group(0):
        return spoken
    return padded(spoken, match.string, match.start(), match.end())


def padded(spoken: str, text: str, start: int, end: int) -> str:
    """Spaces around spoken words only where a letter or digit would otherwise touch them."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    if before.isalnum() and (before.isascii() or spoken[:1].isascii()):
        spoken = " " + spoken
    if after.isalnum() and (after.isascii() or spoken[-1:].isascii()):
        spoken += " "
    return spoken

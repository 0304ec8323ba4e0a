"""Putting the spoken words of a matched number, numeral or symbol in its place."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.text.language import Languages

Reader = Callable[[re.Match[str], str], str]  # (match, language) -> its words; the match itself if none


def read_match(match: re.Match[str], reader: Reader, languages: Languages) -> str:
    """The words ``reader`` gives for ``match`` in its sentence's language, spaced from the letters
    beside it."""
    language = languages.around(match.string, match.start(), match.end())
    spoken = reader(match, language)
    if spoken == match.group(0):
        return spoken
    return padded(spoken, match.string, match.start(), match.end())


def padded(spoken: str, text: str, start: int, end: int) -> str:
    """Spaces around spoken English words where a letter or digit would otherwise touch them.

    Chinese words need none, next to Chinese or Latin letters alike ('八G', '一百二十八个token').
    """
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    if before.isalnum() and spoken[:1].isascii():
        spoken = " " + spoken
    if after.isalnum() and spoken[-1:].isascii():
        spoken += " "
    return spoken

"""Which language a number or symbol is read in: that of its neighbours, else that of its paragraph."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.text.marks import SEPARATOR

DefaultLanguage = Callable[[str, int], str]  # (text, position) -> the paragraph's language there

_CJK_OR_CJK_PUNCT = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")


def paragraph_language(text: str, forced: str = "") -> str:
    """'zh' when Chinese characters outnumber English words (ChatTTS's own rule), else 'en'.

    Counted cheaply: non-ASCII characters take two extra bytes in UTF-8 when they are CJK, and words
    are about as many as spaces.
    """
    if forced:
        return forced
    if text.isascii():
        return "en"
    wide = (len(text.encode("utf-8", "surrogatepass")) - len(text)) // 2
    words = text.count(" ") + 1
    return "zh" if wide > words else "en"


class ParagraphLanguages:
    """The default language of the paragraph a position of the joined text falls in."""

    def __init__(self, languages: list[str]) -> None:
        self._languages = languages
        self._single = languages[0] if len(set(languages)) == 1 else ""

    def at(self, text: str, position: int) -> str:
        """``text`` is the joined text as it stands when asked (rules rewrite it as they go)."""
        if self._single:
            return self._single
        index = text.count(SEPARATOR, 0, position)  # rare: only numbers with no letter beside them ask
        return self._languages[min(index, len(self._languages) - 1)]


def neighbour_language(text: str, start: int, end: int, default: DefaultLanguage) -> str:
    """The language of text[start:end]'s neighbours: the next visible character, else the previous one."""
    after = text[end : end + 3].lstrip(" ")
    before = text[max(0, start - 3) : start].rstrip(" ")
    for ch in (after[:1], before[-1:]):
        if not ch:
            continue
        if _CJK_OR_CJK_PUNCT.match(ch):
            return "zh"
        if ch.isascii() and ch.isalpha():
            return "en"
    return default(text, start)

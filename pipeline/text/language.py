"""Which language a number, numeral or symbol is read in: that of the sentence around it.

A listener hears a sentence in one voice and one language, so ``8G`` in ``只有8G内存`` is ``八G`` and
``128 token`` in ``每条128 token`` is ``一百二十八 token``: a Latin word beside a number is a unit or a
label, not the language of the sentence. The sentence decides by ChatTTS's own rule (Chinese when its
Chinese characters outnumber its English words), where only words that stand in an English phrase
(two or more in a row) count; a lone Latin word among Chinese is a name, unit or label. A sentence
with neither takes its paragraph's language, and a paragraph with neither the chapter's.
"""

from __future__ import annotations

import re

from pipeline.text.marks import CJK_RANGE, SEPARATOR

_WINDOW = 300  # characters looked at on each side: a sentence is rarely longer, a paragraph often is
_SENTENCE_MARKS = ("。", "！", "？", "；", "!", "?", ";", SEPARATOR)  # and a period before a space
_CJK_CHARACTER = re.compile(f"[{CJK_RANGE}]")
# A word not glued to a digit ('8G', 'A100' are labels), and two or more of them in a row: a phrase.
_WORD = r"(?<![0-9A-Za-z'])[A-Za-z]+(?:'[A-Za-z]+)?(?![0-9A-Za-z'])"
_ENGLISH_PHRASE = re.compile(rf"{_WORD}(?: {_WORD})+")


def paragraph_language(text: str) -> str:
    """'zh' when Chinese characters outnumber English words, 'en' for English, '' for neither.

    Counted cheaply: non-ASCII characters take two extra bytes in UTF-8 when they are CJK, and words
    are about as many as spaces.
    """
    if text.isascii():
        return "en" if _ENGLISH_PHRASE.search(text) else ""
    wide = (len(text.encode("utf-8", "surrogatepass")) - len(text)) // 2
    words = text.count(" ") + 1
    return "zh" if wide > words else "en"


class Languages:
    """The language to read each number or symbol of a chapter's joined paragraphs in.

    ``forced`` ('zh' or 'en') reads everything in one language; '' decides per sentence. The numbers
    of one sentence are read in one language, judged once.
    """

    def __init__(self, paragraphs: list[str], forced: str = "") -> None:
        self.forced = forced
        self.ascii = not forced and all(paragraph.isascii() for paragraph in paragraphs)
        found = [paragraph_language(paragraph) for paragraph in paragraphs] if not forced else []
        chapter = _majority([language for language in found if language]) or "en"
        self._paragraphs = [language or chapter for language in found]
        self._single = forced or (self._paragraphs[0] if len(set(self._paragraphs)) == 1 else "")
        self._text = ""  # the text whose sentences' languages are remembered
        self._sentences: dict[tuple[int, int], str] = {}

    def at(self, text: str, position: int) -> str:
        """The language of the paragraph ``position`` falls in; ``text`` is the joined text as it
        stands when asked (rules rewrite it as they go)."""
        if self._single:
            return self._single
        index = text.count(SEPARATOR, 0, position)  # rare: only sentences with no letter ask
        return self._paragraphs[min(index, len(self._paragraphs) - 1)]

    def around(self, text: str, start: int, end: int) -> str:
        """The language of the sentence around text[start:end]."""
        if self.forced:
            return self.forced
        if self.ascii:
            return "en"
        low, high = sentence_bounds(text, start, end)
        if text is self._text and (low, high) in self._sentences:  # the numbers of one sentence agree
            return self._sentences[low, high]
        if text is not self._text:
            self._text, self._sentences = text, {}
        language = _evidence(f"{text[low:start]}\x00{text[end:high]}") or self.at(text, start)
        self._sentences[low, high] = language
        return language


def sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence around text[start:end] begins and ends (looking at most a window away)."""
    low = max(0, start - _WINDOW)
    high = min(len(text), end + _WINDOW)
    period = text.rfind(". ", low, start)
    begins = max(text.rfind(mark, low, start) + 1 for mark in _SENTENCE_MARKS)
    begins = max(begins, period + 2 if period >= 0 else 0)
    ends = [found for mark in _SENTENCE_MARKS if (found := text.find(mark, end, high)) >= 0]
    period = text.find(". ", end, high)
    ends.append(period if period >= 0 else high)
    return max(begins, low), min(ends)


def _evidence(sentence: str) -> str:
    """'zh' or 'en' by ChatTTS's rule, Chinese characters against the words of English phrases; ''
    when the sentence has neither (only labels such as '8G' or '128 token')."""
    if sentence.isascii():
        return "en" if _ENGLISH_PHRASE.search(sentence) else ""
    chinese = len(_CJK_CHARACTER.findall(sentence))
    words = sum(phrase.group(0).count(" ") + 1 for phrase in _ENGLISH_PHRASE.finditer(sentence))
    if chinese > words:
        return "zh"
    return "en" if words else ""


def _majority(languages: list[str]) -> str:
    if not languages:
        return ""
    return "zh" if languages.count("zh") > len(languages) / 2 else "en"

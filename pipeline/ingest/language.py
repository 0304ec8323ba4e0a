"""A book's language where its file states none: Chinese or English, told from its text.

ChatTTS reads Chinese and English, so those are the answers. The rule is the one ChatTTS applies to
each sentence, taken over the book's first 100,000 characters: ``zh`` when Han characters outnumber
Latin-script words, ``en`` when there are Latin words, ``""`` (unknown; the tags then say ``und``)
when there are neither. A stated language is kept as the book states it, unless it is not a
language tag at all (``English``, ``und``, empty): then the text decides; or unless it says Chinese
or English and the text is clearly the other (at least twice as many Latin words as Han characters,
or the reverse): a mostly English book tagged ``zh-CN`` is English. A language the user gives
(``--language``) is taken as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from pipeline.types import BookMetadata, Chapter

SAMPLE_CHARACTERS = 100_000  # enough for a stable answer; a whole book would cost ~10 ms per MB

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
# A BCP-47 tag: a 2-3 letter primary language subtag, then any subtags (zh-Hans-CN, en_GB as typed).
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")
_UNDETERMINED = "und"


CLEAR_SHARE = 2  # the text overrules a stated zh/en where the other outnumbers it this many times
_READ = ("zh", "en")  # the languages ChatTTS reads, which the text can tell apart


def with_language(metadata: BookMetadata, chapters: Sequence[Chapter], chosen: str = "") -> BookMetadata:
    """``metadata`` with the language ``chosen`` by the user, else its own unless its text clearly
    says otherwise, else the one detected from ``chapters``."""
    language = chosen.strip() or book_language(metadata.language, chapters)
    return metadata if language == metadata.language else replace(metadata, language=language)


def language_warning(stated: str, decided: str) -> str | None:
    """What a listener is told when the text overruled the language the book states."""
    stated = stated.strip()
    if not _is_tag(stated) or decided == stated or _primary(decided) == _primary(stated):
        return None
    return (f"the book states its language as {stated}, but its text is mostly "
            f"{'Chinese' if decided == 'zh' else 'English'}: tagged {decided} "
            f"(--language {stated} keeps the stated one)")


def book_language(stated: str, chapters: Sequence[Chapter]) -> str:
    """The book's own language tag when it is one (and its text does not clearly say it is the
    other of Chinese and English), else :func:`detect_language`."""
    stated = stated.strip()
    if not _is_tag(stated):
        return detect_language(chapters)
    if _primary(stated) in _READ:
        clear = _clear_language(*_counts(chapters))
        if clear and clear != _primary(stated):
            return clear
    return stated


def check_language_tag(text: str) -> str:
    """``text`` as a language tag for ``--language`` ('en', 'en-GB', 'zh-CN'); ValueError saying
    what is wrong otherwise."""
    tag = text.strip().replace("_", "-")
    if not _is_tag(tag):
        raise ValueError(f"--language {text!r} is not a language tag: give one such as en, en-GB, zh or zh-CN")
    return tag


def detect_language(chapters: Sequence[Chapter]) -> str:
    """'zh' when Han characters outnumber Latin words in the sample, 'en' when Latin words are
    there, '' otherwise."""
    han, words = _counts(chapters)
    if han > words:
        return "zh"
    return "en" if words else ""


def _counts(chapters: Sequence[Chapter]) -> tuple[int, int]:
    """Han characters and Latin-script words in the sample."""
    sample = "\n".join(_sample(chapters, SAMPLE_CHARACTERS))
    return len(_HAN.findall(sample)), len(_LATIN_WORD.findall(sample))


def _clear_language(han: int, words: int) -> str:
    if han >= CLEAR_SHARE * words and han:
        return "zh"
    if words >= CLEAR_SHARE * han and words:
        return "en"
    return ""


def _is_tag(text: str) -> bool:
    return bool(_LANGUAGE_TAG.fullmatch(text)) and text.lower() != _UNDETERMINED


def _primary(tag: str) -> str:
    primary = tag.replace("_", "-").split("-")[0].lower()
    return {"chi": "zh", "zho": "zh", "eng": "en"}.get(primary, primary)


def _sample(chapters: Sequence[Chapter], limit: int) -> Iterator[str]:
    """The chapters' paragraphs in reading order, up to ``limit`` characters."""
    left = limit
    for chapter in chapters:
        for paragraph in chapter.paragraphs:
            if left <= 0:
                return
            yield paragraph[:left]
            left -= len(paragraph)

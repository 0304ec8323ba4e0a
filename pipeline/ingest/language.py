"""A book's language where its file states none: Chinese or English, told from its text.

ChatTTS reads Chinese and English, so those are the answers. The rule is the one ChatTTS applies to
each sentence, taken over the book's first 100,000 characters: ``zh`` when Han characters outnumber
Latin-script words, ``en`` when there are Latin words, ``""`` (unknown; the tags then say ``und``)
when there are neither. A stated language is kept as the book states it, unless it is not a
language tag at all (``English``, ``und``, empty): then the text decides.
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


def with_language(metadata: BookMetadata, chapters: Sequence[Chapter]) -> BookMetadata:
    """``metadata`` with its language stated, or detected from ``chapters`` where it is not."""
    language = book_language(metadata.language, chapters)
    return metadata if language == metadata.language else replace(metadata, language=language)


def book_language(stated: str, chapters: Sequence[Chapter]) -> str:
    """The book's own language tag when it is one, else :func:`detect_language`."""
    stated = stated.strip()
    if _LANGUAGE_TAG.fullmatch(stated) and stated.lower() != _UNDETERMINED:
        return stated
    return detect_language(chapters)


def detect_language(chapters: Sequence[Chapter]) -> str:
    """'zh' when Han characters outnumber Latin words in the sample, 'en' when Latin words are
    there, '' otherwise."""
    sample = "\n".join(_sample(chapters, SAMPLE_CHARACTERS))
    han = len(_HAN.findall(sample))
    words = len(_LATIN_WORD.findall(sample))
    if han > words:
        return "zh"
    return "en" if words else ""


def _sample(chapters: Sequence[Chapter], limit: int) -> Iterator[str]:
    """The chapters' paragraphs in reading order, up to ``limit`` characters."""
    left = limit
    for chapter in chapters:
        for paragraph in chapter.paragraphs:
            if left <= 0:
                return
            yield paragraph[:left]
            left -= len(paragraph)

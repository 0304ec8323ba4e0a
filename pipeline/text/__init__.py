"""The text stage: a chapter's paragraphs → normalised, speakable sentences for ChatTTS.

    from pipeline.text import split_sentences
    sentences = split_sentences(chapter)

The chapter's title (when it has one) is spoken first, as sentences with ``paragraph_index == -1``;
then each paragraph's sentences, with ``paragraph_index`` its position in ``chapter.paragraphs``.
``index`` counts all of them from 0. Each paragraph is normalised (``normalize_text``) and then only
*cut*, never changed, so joining a paragraph's sentences gives back its normalised text.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pipeline.errors import BookError
from pipeline.text.normalize import Drops, normalize, paragraph_language
from pipeline.text.options import TextOptions
from pipeline.text.sentences import split_text
from pipeline.types import Chapter, Sentence

__all__ = ["ChapterText", "TextOptions", "normalize_text", "segment_chapter", "split_sentences",
           "speakability_warnings"]

logger = logging.getLogger(__name__)
TITLE_PARAGRAPH = -1
# Characters that normalisation never drops with a count: a chapter made only of these needs no scan.
_NEVER_COUNTED = re.compile(
    r"[\x00-\x23\x25-\x3b\x3d\x3f-\x5d\x5f-\x7b\x7d\u00a0\u00a1\u00ab\u00b7\u00bb\u00bf\u00c0-\u00d6"
    r"\u00d8-\u00f6\u00f8-\u00ff\u2010-\u2027\u2030-\u205e\u3000-\u303f\u4e00-\u9fff\uff01-\uff5e]*"
)


@dataclass(frozen=True)
class ChapterText:
    """A chapter's sentences and what its normalisation had to leave out."""

    sentences: tuple[Sentence, ...]
    warnings: tuple[str, ...]


def normalize_text(text: str, options: TextOptions | None = None, drops: Drops | None = None) -> str:
    """One paragraph (or title) in ChatTTS's alphabet, numbers and symbols spoken.

    Args:
        text: the paragraph as the book has it.
        options: language forcing and how links are read.
        drops: when given, counts of what was dropped are added to it.

    Returns:
        The text the paragraph's sentences are cut from.
    """
    options = options or TextOptions()
    language = paragraph_language(text, options.language)
    return normalize(text, language, options.read_urls, drops)


def segment_chapter(chapter: Chapter, options: TextOptions | None = None) -> ChapterText:
    """Split a chapter into sentences and report what could not be spoken.

    Raises:
        BookError: ``options.fail_on_unsupported_script`` and the chapter holds such letters.
    """
    options = options or TextOptions()
    drops = Drops()
    sentences: list[Sentence] = []
    sources = [(TITLE_PARAGRAPH, chapter.title)] if chapter.title.strip() else []
    sources += list(enumerate(chapter.paragraphs))
    for paragraph_index, source in sources:
        for text in _sentences_of(source, options, drops):
            sentences.append(Sentence(chapter.index, len(sentences), paragraph_index, text))
    warnings = tuple(_warnings(chapter, drops))
    if drops.scripts and options.fail_on_unsupported_script:
        raise unsupported_script_error(chapter, drops)
    for warning in warnings:
        logger.warning("%s", warning)
    return ChapterText(tuple(sentences), warnings)


def split_sentences(chapter: Chapter, options: TextOptions | None = None) -> list[Sentence]:
    """The chapter as speakable sentences: title first (paragraph_index -1), then each paragraph's.

    Args:
        chapter: a chapter from ``pipeline.ingest.read_book``.
        options: sentence length limits, language forcing, link reading, strictness.

    Returns:
        Sentences with ``index`` running from 0 over the whole chapter. Dropped characters are logged
        as warnings (``segment_chapter`` returns them).

    Raises:
        BookError: ``options.fail_on_unsupported_script`` and the chapter holds such letters.
    """
    return list(segment_chapter(chapter, options).sentences)


def speakability_warnings(chapter: Chapter, options: TextOptions | None = None) -> tuple[list[str], Drops]:
    """What reading this chapter would drop (emoji, symbols, foreign scripts), without splitting it."""
    options = options or TextOptions()
    drops = Drops()
    for source in (chapter.title, *chapter.paragraphs):
        if not _NEVER_COUNTED.fullmatch(source) or (options.read_urls == "drop" and "://" in source):
            normalize_text(source, options, drops)
    return _warnings(chapter, drops), drops


def unsupported_script_error(chapter: Chapter, drops: Drops) -> BookError:
    scripts = ", ".join(f"{name} ({count})" for name, count in drops.scripts.most_common())
    return BookError(f"chapter {chapter.index + 1} '{chapter.title}'",
                     f"holds letters the voice cannot read: {scripts}",
                     "translate or remove them, or allow them to be dropped (fail_on_unsupported_script=False)")


def _sentences_of(source: str, options: TextOptions, drops: Drops) -> list[str]:
    text = normalize_text(source, options, drops)
    if not text:
        return []
    return split_text(text, options.max_chars, options.min_chars, options.cjk_weight)


def _warnings(chapter: Chapter, drops: Drops) -> list[str]:
    if not drops:
        return []
    name = f"chapter {chapter.index + 1}" + (f" '{chapter.title}'" if chapter.title else "")
    return [f"{name}: {phrase}" for phrase in drops.describe()]

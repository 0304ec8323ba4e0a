"""The text stage: a chapter's paragraphs → normalised, speakable sentences for ChatTTS.

    from pipeline.text import split_sentences
    sentences = split_sentences(chapter)

A chapter (``chapters``) is normalised paragraph by paragraph (``normalize``: what the voice cannot
read becomes words, pauses or nothing) and cut into sentences (``sentences``). On request
(``TextOptions.written``) each sentence also gets its words as the book writes them and their place
in the book file (``sources``, ``written``), for read-along editions.
"""

from __future__ import annotations

from pipeline.text.chapters import (
    AnnouncedChapter,
    ChapterText,
    segment_chapter,
    speakability_warnings,
    split_sentences,
    unsupported_script_error,
)
from pipeline.text.drops import Drops
from pipeline.text.normalize import normalize_text
from pipeline.text.options import TextOptions

__all__ = [
    "AnnouncedChapter",
    "ChapterText",
    "Drops",
    "TextOptions",
    "normalize_text",
    "segment_chapter",
    "speakability_warnings",
    "split_sentences",
    "unsupported_script_error",
]

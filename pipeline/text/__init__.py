"""The text stage: a chapter's paragraphs → normalised, speakable sentences for ChatTTS.

    from pipeline.text import split_sentences
    sentences = split_sentences(chapter)

A chapter (``chapters``) is normalised paragraph by paragraph (``normalize``: what the voice cannot
read becomes words, pauses or nothing) and cut into sentences (``sentences``). On request
(``TextOptions.written``) each sentence also gets its words as the book writes them and their place
in the book file (``sources``, ``written``), for read-along editions.
"""

from __future__ import annotations

from pipeline.lazy_exports import lazy_exports

__getattr__ = lazy_exports(globals(), {
    "AnnouncedChapter": "pipeline.text.chapters",
    "ChapterText": "pipeline.text.chapters",
    "segment_chapter": "pipeline.text.chapters",
    "speakability_warnings": "pipeline.text.chapters",
    "split_sentences": "pipeline.text.chapters",
    "unsupported_script_error": "pipeline.text.chapters",
    "Drops": "pipeline.text.drops",
    "normalize_text": "pipeline.text.normalize",
    "TextOptions": "pipeline.text.options",
})

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

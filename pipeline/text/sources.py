"""Each sentence of a chapter with its words as the book writes them (``Sentence.written``), and,
for an EPUB, where those words stand in the book file.

A paragraph's sentences are found in the paragraph as ingestion gave it (``written.written_spans``).
The title's sentences are found in the heading the book shows where the title is announced (a
chapter titled from the table of contents may have none: then in the announcement itself), and in
the chapter title for the formats whose read-along edition is generated (TXT, Markdown, HTML), whose
chapters show that title. Words the reader supplies (a note's 'Note 1.', a part announced before
its chapter) have no written span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby

from pipeline.text.written import written_spans
from pipeline.types import Chapter, ParagraphSource, Sentence, TextPlace, WrittenSpan

TITLE_PARAGRAPH = -1


def written_title(chapter: Chapter, spoken_title: str) -> tuple[str, ParagraphSource | None]:
    """The title's words as the reader sees them where they are announced, and where they stand."""
    source = chapter.source
    if source is None:
        return chapter.title, None
    if source.heading:
        return source.heading, source.heading_source
    return spoken_title, None


def with_written_spans(chapter: Chapter, spoken_title: str, sentences: Sequence[Sentence]) -> list[Sentence]:
    """``sentences`` (the chapter's, in order) each with its ``written`` span found."""
    result: list[Sentence] = []
    for paragraph_index, group in groupby(sentences, key=lambda sentence: sentence.paragraph_index):
        own = list(group)
        text, source = _paragraph(chapter, spoken_title, paragraph_index)
        spans = written_spans(text, [sentence.text for sentence in own])
        for sentence, (start, end) in zip(own, spans, strict=True):
            result.append(replace(sentence, written=_span(text, start, end, source)))
    return result


def _paragraph(chapter: Chapter, spoken_title: str, index: int) -> tuple[str, ParagraphSource | None]:
    if index == TITLE_PARAGRAPH:
        return written_title(chapter, spoken_title)
    places = chapter.source.paragraphs if chapter.source is not None else ()
    return chapter.paragraphs[index], places[index] if index < len(places) else None


def _span(text: str, start: int, end: int, source: ParagraphSource | None) -> WrittenSpan | None:
    """The span ``text[start:end]`` less what the reader put before the book's words, with its place."""
    if source is not None and start < source.prefix:
        start = source.prefix
        while start < end and text[start].isspace():
            start += 1
    if start >= end:
        return None
    place = None
    if source is not None:
        offset = source.place.start - source.prefix
        place = TextPlace(source.place.document, source.place.block, start + offset, end + offset)
    return WrittenSpan(text[start:end], start, end, place)

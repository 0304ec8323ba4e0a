"""A chapter → its speakable sentences, and the warnings about what reading it leaves out.

The chapter's announcement (its title, or for an ``AnnouncedChapter`` the fuller announcement it
carries) is spoken first, as sentences with ``paragraph_index == -1``;
then each paragraph's sentences, with ``paragraph_index`` its position in ``chapter.paragraphs``.
``index`` counts all of them from 0. Each paragraph gets the lexicon's pronunciations (``lexicon``),
is normalised (``normalize``) and then only *cut* (``sentences``), never changed, so joining a
paragraph's sentences gives back its normalised text. With ``TextOptions.dialogue`` a paragraph is
first cut at its quotations (``dialogue``): each sentence then lies wholly inside or outside one,
and says so in its ``role``; the announcement is always the narrator's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pipeline.errors import BookError
from pipeline.text.characters import scan_drops
from pipeline.text.dialogue import split_roles
from pipeline.text.drops import Drops
from pipeline.text.marks import SEPARATOR
from pipeline.text.normalize import normalize_paragraphs, normalize_text
from pipeline.text.options import TextOptions
from pipeline.text.sentences import split_paragraphs
from pipeline.text.sources import with_written_spans
from pipeline.text.titles import title_parts
from pipeline.types import NARRATOR, Chapter, Sentence

logger = logging.getLogger(__name__)
TITLE_PARAGRAPH = -1


@dataclass(frozen=True)
class AnnouncedChapter(Chapter):
    """A chapter whose spoken announcement says more than the title a player shows: entering a new
    part of a book, the listener hears 'Part Two. Chapter 1', while the chapter list shows 'Chapter 1'."""

    announcement: str = ""


def spoken_title(chapter: Chapter) -> str:
    """What is said first: the chapter's announcement where it has one, else its title."""
    if isinstance(chapter, AnnouncedChapter) and chapter.announcement.strip():
        return chapter.announcement
    return chapter.title


@dataclass(frozen=True)
class ChapterText:
    """A chapter's sentences and what its normalisation had to leave out."""

    sentences: tuple[Sentence, ...]
    warnings: tuple[str, ...]


def segment_chapter(chapter: Chapter, options: TextOptions | None = None) -> ChapterText:
    """Split a chapter into sentences and report what could not be spoken.

    Raises:
        BookError: ``options.fail_on_unsupported_script`` and the chapter holds such letters.
    """
    options = options or TextOptions()
    drops = Drops()
    title = spoken_title(chapter)
    parts = title_parts(title) if title.strip() else []
    sources = _stretches(chapter, [text for text, _ in parts], options)
    spoken = options.lexicon.apply([text for _, _, text in sources])
    normalized = normalize_paragraphs(spoken, options, drops)
    if len(parts) > 1:  # a title in two languages: each part read in its own (what it drops is counted)
        for number, (_, language) in enumerate(parts):
            normalized[number] = normalize_text(spoken[number], replace(options, language=language))
    pieces = split_paragraphs(normalized, options.max_chars, options.min_chars, options.cjk_weight)
    numbered = [
        (paragraph_index, role, piece)
        for (paragraph_index, role, _), stretch_pieces in zip(sources, pieces, strict=True)
        for piece in stretch_pieces
    ]
    sentences = [
        Sentence(chapter.index, number, paragraph_index, piece, role=role)
        for number, (paragraph_index, role, piece) in enumerate(numbered)
    ]
    if options.written:
        sentences = with_written_spans(chapter, title, sentences)
    warnings = tuple(_warnings(chapter, drops))
    if drops.scripts and options.fail_on_unsupported_script:
        raise unsupported_script_error(chapter, drops)
    for warning in warnings:  # the book's warnings, which read_book logs, already count these
        logger.debug("%s", warning)
    return ChapterText(tuple(sentences), warnings)


def _stretches(chapter: Chapter, title: list[str], options: TextOptions) -> list[tuple[int, str, str]]:
    """(paragraph index, role, text) of what is read, in order: the announcement (the narrator's;
    a title in two languages in its parts, ``titles.py``), then each paragraph, cut at its
    quotations when dialogue has a voice of its own."""
    stretches = [(TITLE_PARAGRAPH, NARRATOR, part) for part in title]
    for index, paragraph in enumerate(chapter.paragraphs):
        if options.dialogue:
            stretches += [(index, role, text) for role, text in split_roles(paragraph, options.book_language)]
        else:
            stretches.append((index, NARRATOR, paragraph))
    return stretches


def split_sentences(chapter: Chapter, options: TextOptions | None = None) -> list[Sentence]:
    """The chapter as speakable sentences: title first (paragraph_index -1), then each paragraph's.

    Args:
        chapter: a chapter from ``pipeline.ingest.read_book``.
        options: sentence length limits, language forcing, link reading, strictness, the
            pronunciation lexicon, and whether quotations are cut out for a dialogue voice.

    Returns:
        Sentences with ``index`` running from 0 over the whole chapter, each with its ``role``. What normalisation dropped is
        counted in the book's warnings (``segment_chapter`` returns this chapter's count too).

    Raises:
        BookError: ``options.fail_on_unsupported_script`` and the chapter holds such letters.
    """
    return list(segment_chapter(chapter, options).sentences)


def speakability_warnings(chapter: Chapter) -> tuple[list[str], Drops]:
    """What reading this chapter would drop (emoji, symbols, foreign scripts), found by a quick scan.

    The scan counts what the first normalisation step drops, which is all of the above; a stray ASCII
    symbol that only later steps drop (a lone '$') is counted by ``segment_chapter`` alone.
    """
    drops = Drops()
    scan_drops(spoken_title(chapter) + SEPARATOR + SEPARATOR.join(chapter.paragraphs), drops)
    return _warnings(chapter, drops), drops


def unsupported_script_error(chapter: Chapter, drops: Drops) -> BookError:
    """The error for a chapter holding letters the voice cannot read, naming the scripts and the fix."""
    scripts = ", ".join(f"{name} ({count})" for name, count in drops.scripts.most_common())
    return BookError(
        f"chapter {chapter.index + 1} '{chapter.title}'",
        f"holds letters the voice cannot read: {scripts}",
        "translate or remove them, or run without --fail-on-unsupported-script to drop them with a warning",
    )


def _warnings(chapter: Chapter, drops: Drops) -> list[str]:
    if not drops:
        return []
    name = f"chapter {chapter.index + 1}" + (f" '{chapter.title}'" if chapter.title else "")
    return [f"{name}: {phrase}" for phrase in drops.describe()]

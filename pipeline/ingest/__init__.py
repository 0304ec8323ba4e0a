"""Ingestion: a book file (EPUB, PDF, DOCX, ODT, FB2, MOBI/AZW3, TXT, Markdown, HTML) → ``Book`` of
chapters of paragraphs.

    from pipeline.ingest import read_book
    book = read_book(Path("novel.epub"))

Every failure a user can cause with a file (missing, unsupported, corrupt, hostile, DRM-protected,
empty) is a ``BookError`` naming the file and the problem. Nothing is ever written to disk but a
Kindle book, unpacked into a temporary folder that is removed once it is read.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook, RawChapter
from pipeline.ingest.language import language_warning, with_language
from pipeline.ingest.left_out import left_out_warnings
from pipeline.ingest.notes import place_notes
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.selection import select_chapters
from pipeline.ingest.titles import ChapterTitle, chapter_titles
from pipeline.text import AnnouncedChapter, speakability_warnings, unsupported_script_error
from pipeline.types import Book, Chapter, ChapterSource, ParagraphSource

__all__ = ["SUPPORTED_EXTENSIONS", "IngestOptions", "book_extension", "read_book"]

logger = logging.getLogger(__name__)

# Each format's reader (a module of this package, its function), imported when a book of that
# format is read: an EPUB's run does not import the PDF, Office and Kindle readers (~60 ms of the
# start on the build machine, before the model begins to load).
_READERS: dict[str, tuple[str, str]] = {
    ".epub": ("epub", "read_epub"),
    ".txt": ("plaintext", "read_txt"),
    ".md": ("markdown", "read_markdown"),
    ".markdown": ("markdown", "read_markdown"),
    ".html": ("html", "read_html"),
    ".htm": ("html", "read_html"),
    ".xhtml": ("html", "read_html"),
    ".pdf": ("pdf", "read_pdf"),
    ".docx": ("docx", "read_docx"),
    ".fb2": ("fb2", "read_fb2"),
    ".fb2.zip": ("fb2", "read_fb2"),
    ".odt": ("odt", "read_odt"),
    ".mobi": ("kindle", "read_kindle"),
    ".azw3": ("kindle", "read_kindle"),
    ".azw": ("kindle", "read_kindle"),
}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_READERS)
INTERNAL_ERROR_MARKER = "unexpected error while reading"


def read_book(path: Path, options: IngestOptions | None = None) -> Book:
    """Read a book file into metadata and chapters in reading order.

    Args:
        path: a book file with one of ``SUPPORTED_EXTENSIONS`` (``book_extension`` names it).
        options: what to read and the safety limits; defaults suit bulk runs.

    Returns:
        The book, with its notes placed as ``options.notes`` says, empty chapters dropped, chapters
        numbered from 0 and titled for a player (an ``AnnouncedChapter`` where the listener hears
        more), only those ``options.chapters`` choose (keeping their numbers), and every warning
        about what was left out, once.

    Raises:
        BookError: the file is missing, unsupported, corrupt, hostile, DRM-protected or holds no text,
            or ``options.chapters`` names chapters it does not have.
    """
    path = Path(path)
    options = options or IngestOptions()
    reader = _reader_for(path)
    try:
        raw = reader(path, options)
    except BookError:
        raise
    except RecursionError:
        raise BookError(
            path, "is nested too deeply to read", "a damaged or hostile file; refuse it"
        ) from None
    except MemoryError:
        raise BookError(
            path,
            "needs more memory than is available to read",
            "split the book, or lower the limit with --max-book-mb",
        ) from None
    except Exception as exc:  # a bug of ours must fail this book, never the worker that reads it
        logger.exception("%s: %s", path, INTERNAL_ERROR_MARKER)
        raise BookError(
            path,
            f"{INTERNAL_ERROR_MARKER} ({type(exc).__name__}: {exc})",
            "please report this book to the tts-jobs maintainers",
        ) from exc
    return _finished_book(path, raw, options)


def book_extension(path: Path) -> str:
    """The extension that names a book's format: '.fb2.zip' for a zipped FictionBook, else the suffix."""
    return ".fb2.zip" if path.name.lower().endswith(".fb2.zip") else path.suffix.lower()


def _reader_for(path: Path) -> Callable[[Path, IngestOptions], RawBook]:
    if not path.exists():
        raise BookError(path, "file not found", "check the path")
    if not path.is_file():
        raise BookError(path, "is not a regular file", "give the path of a book file")
    reader = _READERS.get(book_extension(path))
    if reader is None:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise BookError(
            path,
            f"unsupported file type '{path.suffix or '(none)'}'",
            f"convert it to one of {supported} (Calibre's ebook-convert can)",
        )
    module, function = reader
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def _finished_book(path: Path, raw: RawBook, options: IngestOptions) -> Book:
    """The book as it is read: notes placed, empty chapters dropped, titles for the player and the
    listener, and every warning once (logged here, and carried by the book for inspect and status)."""
    placed, warnings = place_notes(raw, options.notes)
    warnings = [*raw.warnings, *warnings, *_left_out_counts(raw)]
    kept = [(candidate, read) for candidate in placed if (read := _paragraphs(candidate))[0]]
    titles = chapter_titles([candidate for candidate, _ in kept])
    chapters = [
        _chapter(index, title, paragraphs, source)
        for index, ((_, (paragraphs, source)), title) in enumerate(zip(kept, titles, strict=True))
    ]
    if not chapters:
        raise BookError(
            path, "holds no readable text", "check that the book is not empty or made only of images"
        )
    chapters = select_chapters(chapters, options.chapters, path)
    for chapter in chapters:
        warnings.extend(_speakability_warnings(path, chapter, options))
    # The language the tags carry: the user's, else the one the file states (unless its text is
    # clearly the other of Chinese and English), else the one its text is written in.
    metadata = with_language(raw.metadata, chapters, options.language)
    if not options.language and (overruled := language_warning(raw.metadata.language, metadata.language)):
        warnings.append(overruled)
    for warning in warnings:
        logger.warning("%s: %s", path, warning)
    return Book(str(path), raw.format, metadata, tuple(chapters), tuple(warnings), tuple(raw.lexicon))


def _paragraphs(raw: RawChapter) -> tuple[tuple[str, ...], ChapterSource | None]:
    """The chapter's paragraphs, trimmed, without the empty ones; and where they stand in the book."""
    known = len(raw.sources) == len(raw.paragraphs) and any(raw.sources)
    paragraphs: list[str] = []
    sources: list[ParagraphSource | None] = []
    for number, paragraph in enumerate(raw.paragraphs):
        text = paragraph.strip()
        if text:
            paragraphs.append(text)
            lead = len(paragraph) - len(paragraph.lstrip())
            sources.append(_trimmed(raw.sources[number], lead) if known else None)
    if not known and raw.heading_source is None:
        return tuple(paragraphs), None
    return tuple(paragraphs), ChapterSource(tuple(sources), raw.heading, raw.heading_source)


def _trimmed(source: ParagraphSource | None, lead: int) -> ParagraphSource | None:
    """``source`` for its paragraph less ``lead`` leading spaces."""
    if source is None or not lead:
        return source
    start = source.place.start + max(lead - source.prefix, 0)
    return ParagraphSource(replace(source.place, start=start), max(source.prefix - lead, 0))


def _chapter(
    index: int, title: ChapterTitle, paragraphs: tuple[str, ...], source: ChapterSource | None
) -> Chapter:
    shown = " ".join(title.shown.split())
    if title.announced:
        announcement = " ".join(title.announced.split())
        return AnnouncedChapter(index, shown, paragraphs, source, announcement=announcement)
    return Chapter(index=index, title=shown, paragraphs=paragraphs, source=source)


def _left_out_counts(raw: RawBook) -> list[str]:
    """Warnings for what the readers counted as they left it out or stood in for it."""
    counts = left_out_warnings(raw.left_out, raw.formulas)
    if raw.line_numbers:
        counts.append(f"left out {raw.line_numbers} line and page numbers (margin numbers are not read)")
    return counts


def _speakability_warnings(path: Path, chapter: Chapter, options: IngestOptions) -> list[str]:
    """Per-chapter warnings about what the voice cannot read; a BookError when told to be strict."""
    warnings, drops = speakability_warnings(chapter)
    if drops.scripts and options.fail_on_unsupported_script:
        error = unsupported_script_error(chapter, drops)
        raise BookError(path, f"{error.path} {error.problem}", error.fix)
    return warnings

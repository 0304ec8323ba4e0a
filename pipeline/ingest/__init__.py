"""Ingestion: a book file (EPUB, TXT, Markdown, HTML) → ``Book`` of chapters of paragraphs.

    from pipeline.ingest import read_book
    book = read_book(Path("novel.epub"))

Every failure a user can cause with a file (missing, unsupported, corrupt, hostile, DRM-protected,
empty) is a ``BookError`` naming the file and the problem. Nothing is ever written to disk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook, RawChapter
from pipeline.ingest.epub import read_epub
from pipeline.ingest.html import read_html
from pipeline.ingest.markdown import read_markdown
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.plaintext import read_txt
from pipeline.text import speakability_warnings, unsupported_script_error
from pipeline.types import Book, Chapter

__all__ = ["SUPPORTED_EXTENSIONS", "IngestOptions", "read_book"]

logger = logging.getLogger(__name__)

_READERS: dict[str, Callable[[Path, IngestOptions], RawBook]] = {
    ".epub": read_epub,
    ".txt": read_txt,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".xhtml": read_html,
}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_READERS)
INTERNAL_ERROR_MARKER = "unexpected error while reading"


def read_book(path: Path, options: IngestOptions | None = None) -> Book:
    """Read a book file into metadata and chapters in reading order.

    Args:
        path: an .epub, .txt, .md/.markdown or .html/.htm/.xhtml file.
        options: what to read and the safety limits; defaults suit bulk runs.

    Returns:
        The book, with empty chapters dropped, chapters numbered from 0 and reader warnings.

    Raises:
        BookError: the file is missing, unsupported, corrupt, hostile, DRM-protected or holds no text.
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
            "lower IngestOptions' size limits or split the book",
        ) from None
    except Exception as exc:  # a bug of ours must fail this book, never the worker that reads it
        logger.exception("%s: %s", path, INTERNAL_ERROR_MARKER)
        raise BookError(
            path,
            f"{INTERNAL_ERROR_MARKER} ({type(exc).__name__}: {exc})",
            "please report this book to the tts-jobs maintainers",
        ) from exc
    return _finished_book(path, raw, options)


def _reader_for(path: Path) -> Callable[[Path, IngestOptions], RawBook]:
    if not path.exists():
        raise BookError(path, "file not found", "check the path")
    if not path.is_file():
        raise BookError(path, "is not a regular file", "give the path of a book file")
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise BookError(
            path,
            f"unsupported file type '{path.suffix or '(none)'}'",
            f"convert it to one of {supported} (Calibre's ebook-convert can)",
        )
    return reader


def _finished_book(path: Path, raw: RawBook, options: IngestOptions) -> Book:
    chapters: list[Chapter] = []
    warnings = list(raw.warnings)
    for candidate in raw.chapters:
        chapter = _chapter(len(chapters), candidate)
        if chapter is None:
            continue
        chapters.append(chapter)
        warnings.extend(_speakability_warnings(path, chapter, options))
    if not chapters:
        raise BookError(
            path, "holds no readable text", "check that the book is not empty or made only of images"
        )
    for warning in warnings:
        logger.debug("%s: %s", path, warning)
    return Book(str(path), raw.format, raw.metadata, tuple(chapters), tuple(warnings))


def _chapter(index: int, raw: RawChapter) -> Chapter | None:
    paragraphs = tuple(text for text in (paragraph.strip() for paragraph in raw.paragraphs) if text)
    if not paragraphs:
        return None
    return Chapter(index=index, title=" ".join(raw.title.split()), paragraphs=paragraphs)


def _speakability_warnings(path: Path, chapter: Chapter, options: IngestOptions) -> list[str]:
    """Per-chapter warnings about what the voice cannot read; a BookError when told to be strict."""
    warnings, drops = speakability_warnings(chapter)
    if drops.scripts and options.fail_on_unsupported_script:
        error = unsupported_script_error(chapter, drops)
        raise BookError(path, f"{error.path} {error.problem}", error.fix)
    return warnings

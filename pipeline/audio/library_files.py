"""The files an audiobook library reads beside the audio: Audiobookshelf's ``metadata.json``
(its own format: title, subtitle, authors, narrators, series as "Name #part", genres, published
year, publisher, description, ISBN, language; the scanner prefers it to the audio's tags) and
``desc.txt`` (the description alone, which its scanner also reads)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from pipeline.audio.assembly_types import READALONG_FORMATS
from pipeline.audio.failures import os_error_fix
from pipeline.audio.tags import book_year
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import BookMetadata

METADATA_JSON = "metadata.json"
DESCRIPTION_TXT = "desc.txt"


def library_metadata(metadata: BookMetadata, narrator: str) -> dict[str, object]:
    """The book as Audiobookshelf's metadata.json spells it."""
    series = []
    if metadata.series:
        series.append(f"{metadata.series} #{metadata.series_index}" if metadata.series_index else metadata.series)
    return {
        "title": metadata.title,
        "subtitle": metadata.subtitle or None,
        "authors": list(metadata.authors),
        "narrators": [narrator] if narrator else [],
        "series": series,
        "genres": list(metadata.subjects),
        "publishedYear": book_year(metadata) or None,
        "publishedDate": metadata.date or None,
        "publisher": metadata.publisher or None,
        "description": metadata.description or None,
        "isbn": metadata.isbn or None,
        "language": metadata.language or None,
        "tags": [],
    }


def write_library_files(folder: Path, metadata: BookMetadata, narrator: str, formats: Sequence[str]) -> list[Path]:
    """Write metadata.json (and desc.txt where the book has a description) into ``folder`` when
    ``formats`` hold an audiobook (not for read-along files alone); returns the files written."""
    if not set(formats) - set(READALONG_FORMATS):
        return []
    written = [_write(folder / METADATA_JSON,
                      json.dumps(library_metadata(metadata, narrator), ensure_ascii=False, indent=2) + "\n")]
    if metadata.description:
        written.append(_write(folder / DESCRIPTION_TXT, metadata.description.strip() + "\n"))
    return written


def _write(path: Path, text: str) -> Path:
    partial = temporary_sibling(path, "partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        raise AssemblyError(f"{path}: cannot write: {exc.strerror} ({os_error_fix(exc)})") from exc
    return path

"""The book's metadata as a job records it (a JSON object beside the job) and as it is read back
for tagging; the cover is stored as a file, so its path is the caller's."""

from __future__ import annotations

from typing import Any

from pipeline.types import BookMetadata

_TEXT_FIELDS = ("publisher", "date", "description", "subtitle", "series", "series_index", "isbn")


def metadata_record(meta: BookMetadata) -> dict[str, Any]:
    """What a job keeps of the book's metadata besides title, authors and language (no cover bytes)."""
    record: dict[str, Any] = {name: getattr(meta, name) for name in _TEXT_FIELDS}
    record["subjects"] = list(meta.subjects)
    record["cover_mime"] = meta.cover_mime
    return record


def metadata_from_record(record: dict[str, Any] | None, title: str, authors: tuple[str, ...], language: str,
                         cover: bytes | None) -> BookMetadata:
    """The metadata a job recorded (a record made before a field existed reads it as empty)."""
    record = record or {}
    texts = {name: str(record.get(name) or "") for name in _TEXT_FIELDS}
    return BookMetadata(title=title, authors=authors, language=language, cover=cover,
                        cover_mime=str(record.get("cover_mime") or ""),
                        subjects=tuple(str(subject) for subject in record.get("subjects") or ()), **texts)

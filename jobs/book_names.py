"""A book is called what its reader calls it: the title it states, else its file's own name.

A job's book is read from the copy stored in the data directory (``jobs/N/source.txt``), whose
name is not the user's: where a reader fell back to the file's name for a book that states no
title, the stored copy's name stands in for the user's, and would become the audiobook's title,
album, chapter and file name. ``as_given`` puts the user's file name back, so every output names
the book the way `inspect` (which reads the user's file) does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pipeline.types import Book


def as_given(book: Book, stored: Path, given_name: str) -> Book:
    """``book`` as read from ``stored``, named after ``given_name`` (the file the user gave)
    wherever the reader named it after ``stored``."""
    stored_stem, given_stem = Path(stored).stem, Path(given_name).stem
    if stored_stem == given_stem or book.metadata.title != stored_stem:
        return book
    chapters = tuple(replace(c, title=given_stem) if c.title == stored_stem else c for c in book.chapters)
    return replace(book, metadata=replace(book.metadata, title=given_stem), chapters=chapters)

"""EPUB 2 and 3: container → package document → spine, chapters from the nav document or NCX.

Reading order is the spine's. Chapter boundaries and titles come from the table of contents (EPUB 3
nav, else EPUB 2 NCX), including entries that point into the middle of a file; a file without an
entry of its own continues the chapter before it. Without a usable table of contents, each spine
document is a chapter (split further at its headings when it holds several chapters).

One module per part of the book, in the order :func:`read_epub` reads them: ``container`` (which
names the package document), ``drm``, ``package`` (manifest, spine, guide), ``metadata`` and
``cover``, ``navigation`` (the table of contents), ``spine`` (the documents' text), ``lexicons``
(the book's pronunciation lexicons), then ``chapters`` and ``front_matter`` (what is read aloud).
"""

from __future__ import annotations

from pathlib import Path

from pipeline.ingest.chapters import RawBook
from pipeline.ingest.epub.chapters import epub_chapters
from pipeline.ingest.epub.container import check_mimetype, package_document_member
from pipeline.ingest.epub.drm import refuse_drm
from pipeline.ingest.epub.lexicons import book_lexicon
from pipeline.ingest.epub.metadata import read_metadata
from pipeline.ingest.epub.navigation import read_table_of_contents
from pipeline.ingest.epub.notes import collect_notes
from pipeline.ingest.epub.package import read_package
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.epub.spine import spine_documents
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.safezip import SafeZip

__all__ = ["read_epub"]


def read_epub(path: Path, options: IngestOptions) -> RawBook:
    """Read an EPUB into metadata and chapters.

    Raises:
        BookError: not a ZIP, hostile, DRM-protected, or missing its container or package document.
    """
    reading = Reading(path)
    with SafeZip(path, options) as archive:
        check_mimetype(archive, reading)
        refuse_drm(archive, path)
        package = read_package(archive, path, package_document_member(archive, path), reading)
        metadata = read_metadata(archive, package, path, reading)
        toc, front_members = read_table_of_contents(archive, package, reading)
        docs = spine_documents(archive, package, options, reading, metadata.language)
        lexicon = book_lexicon(archive, package, [member for doc in docs for member in doc.lexicons], reading)
    chapters = epub_chapters(docs, toc, front_members, metadata.title, options, reading)
    notes, refs, notes_title = collect_notes(docs)
    book = RawBook("epub", metadata, chapters, reading.warnings, notes, refs, notes_title)
    book.formulas = sum(doc.text.formulas for doc in docs)
    book.line_numbers = sum(doc.text.line_numbers for doc in docs)
    for doc in docs:
        book.left_out.add(doc.text.left_out)
    book.lexicon = lexicon
    return book

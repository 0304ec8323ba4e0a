"""Opening a PDF with PDFium under the ingestion limits, and taking out what the reader needs: each
page's text runs with their boxes and font sizes, the outline, the metadata, page 1's picture."""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import BookError
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.pdf.layout import Fragment, PageLines, page_lines
from pipeline.ingest.pdf.runs import page_runs
from pipeline.ingest.pdf.streams import refuse_stream_bombs

MAX_PAGES = 10_000  # more pages than any book: a hostile or generated file
MAX_SECONDS = 120.0  # reading stops past this, whatever the file makes PDFium do
_MAX_OUTLINE_ENTRIES = 10_000

if TYPE_CHECKING:  # PDFium is loaded when a PDF is read, not whenever ingestion is imported
    import pypdfium2 as pdfium


@dataclass(frozen=True)
class OutlineEntry:
    level: int  # 0 for the outermost
    title: str
    page: int  # from 0; -1 when it points nowhere in this file


@dataclass(frozen=True)
class PdfPages:
    pages: list[PageLines]
    without_text: int  # pages that hold no text at all
    outline: list[OutlineEntry]
    metadata: dict[str, str]


def open_pdf(path: Path, options: IngestOptions) -> pdfium.PdfDocument:
    """The document, refused when too large, encrypted or not a PDF."""
    size = path.stat().st_size
    if size > options.max_file_bytes:
        raise BookError(
            path,
            f"is {size:,} bytes, over the {options.max_file_bytes:,}-byte limit",
            "split the book, or raise the limit with --max-book-mb",
        )
    refuse_stream_bombs(path, options)
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise BookError(
                path,
                "is encrypted with a password (DRM or a protected PDF)",
                "use a copy without password protection",
            ) from None
        raise BookError(
            path, f"is not a readable PDF ({' '.join(str(exc).split())[:200]})", "re-export or re-download it"
        ) from None
    pages = len(document)
    if pages > min(MAX_PAGES, options.max_entries):
        document.close()
        raise BookError(
            path,
            f"has {pages:,} pages (more than {min(MAX_PAGES, options.max_entries):,})",
            "a hostile or generated file; split a genuine book into volumes",
        )
    return document


def read_pages(path: Path, document: pdfium.PdfDocument, options: IngestOptions) -> PdfPages:
    """Every page's lines, how many pages hold no text, the outline and the metadata."""
    deadline = time.monotonic() + MAX_SECONDS
    pages: list[PageLines] = []
    without_text = 0
    text_bytes = 0
    for number in range(len(document)):
        if time.monotonic() > deadline:
            raise BookError(
                path,
                f"took more than {MAX_SECONDS:.0f} s to read ({number} of {len(document)} pages read)",
                "a hostile or damaged file; refuse it, or split a genuine book",
            )
        page = document[number]
        try:
            fragments = _fragments(page)
            width, height = page.get_size()
        finally:
            page.close()
        if not any(fragment.text.strip() for fragment in fragments):
            without_text += 1
        text_bytes += sum(len(fragment.text) for fragment in fragments)
        if text_bytes > options.max_uncompressed_bytes:
            raise BookError(
                path,
                f"holds more than {options.max_uncompressed_bytes:,} bytes of text",
                "refuse this file; if it is a genuine book, raise the limit with --max-book-mb",
            )
        pages.append(page_lines(number, fragments, width, height))
    return PdfPages(pages, without_text, _outline(document), _metadata(document))


def _fragments(page: pdfium.PdfPage) -> list[Fragment]:
    textpage = page.get_textpage()
    try:
        return page_runs(textpage)
    finally:
        textpage.close()


def _outline(document: pdfium.PdfDocument) -> list[OutlineEntry]:
    entries = []
    for bookmark in document.get_toc(max_depth=8):
        if len(entries) >= _MAX_OUTLINE_ENTRIES:
            break
        destination = bookmark.get_dest()
        page = destination.get_index() if destination is not None else None
        entries.append(OutlineEntry(bookmark.level, " ".join(bookmark.get_title().split()), page or 0))
        if page is None:
            entries[-1] = OutlineEntry(bookmark.level, entries[-1].title, -1)
    return entries


def _metadata(document: pdfium.PdfDocument) -> dict[str, str]:
    found = {key: " ".join(str(value).split()) for key, value in document.get_metadata_dict().items()}
    found["Lang"] = _catalog_language(document)
    return found


def _catalog_language(document: pdfium.PdfDocument) -> str:
    import pypdfium2.raw as pdfium_c

    getter = getattr(pdfium_c, "FPDFCatalog_GetLanguage", None)
    if getter is None:
        return ""
    size = getter(document, None, 0)
    if size <= 2:
        return ""
    buffer = ctypes.create_string_buffer(size)
    getter(document, buffer, size)
    return buffer.raw[: size - 2].decode("utf-16-le", errors="replace").strip()

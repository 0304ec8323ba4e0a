"""PDF: text in reading order from each page's text layer, through PDFium.

One module per step, in the order :func:`read_pdf` takes them: ``document`` (open under the limits,
text runs with their boxes), ``layout`` (runs → lines, columns read one after the other),
``furniture`` (running heads, page numbers and footnotes taken off the pages), ``paragraphs`` (lines
→ paragraphs and headings, hyphenated words joined), ``chapters`` (where chapters begin).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import replace
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook, RawChapter, Start, clean_title, is_front_matter_title, sections
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.pdf.chapters import PAGES_PER_CHAPTER, font_heading_starts, outline_starts, page_starts
from pipeline.ingest.pdf.cover import first_page_cover
from pipeline.ingest.pdf.document import PdfPages, open_pdf, read_pages
from pipeline.ingest.pdf.furniture import Furniture, without_furniture
from pipeline.ingest.pdf.paragraphs import PdfText, body_size, pdf_blocks
from pipeline.ingest.running_heads import running_heads_warning
from pipeline.ingest.xhtml import Note, NoteRef
from pipeline.types import BookMetadata

__all__ = ["read_pdf"]

_SCAN_SHARE = 0.9  # pages without text past which a PDF is a scan, ...
_SCAN_MIN_PAGES = 10  # ... once it has this many pages (a short one may be mostly pictures)
_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?")
_CONVERTER_TITLE = re.compile(r"^(?:microsoft word - |untitled\b)|\.(?:docx?|odt|rtf|tex|indd)$", re.IGNORECASE)


def read_pdf(path: Path, options: IngestOptions) -> RawBook:
    """Read a PDF's text layer into metadata and chapters.

    Raises:
        BookError: not a PDF, encrypted, too many pages or too much text, or without a text layer.
    """
    document = open_pdf(path, options)
    try:
        pages = read_pages(path, document, options)
        cover, cover_mime = first_page_cover(document)
    finally:
        document.close()
    warnings = _text_layer_warnings(path, pages)
    body = body_size(pages.pages)
    bare, furniture = without_furniture(pages.pages, body)
    text = pdf_blocks(bare, body)
    metadata = _metadata(pages.metadata, path)
    starts, heading_title = _starts(pages, text, warnings)
    title = metadata.title or clean_title(heading_title) or path.stem
    metadata = replace(metadata, title=title, cover=cover, cover_mime=cover_mime)
    chapters = _chapters(text, starts, title, options, warnings)
    warnings.extend(_furniture_warnings(furniture))
    book = RawBook("pdf", metadata, chapters, warnings)
    book.notes, book.note_refs = _notes(furniture, text)
    book.line_numbers = furniture.page_numbers
    return book


def _text_layer_warnings(path: Path, pages: PdfPages) -> list[str]:
    """A warning for pages without text; a BookError when (nearly) none has any: a scan, perhaps
    with a line of text stamped on a page or two, would make an audiobook of almost nothing."""
    total, blank = len(pages.pages), pages.without_text
    if total and (blank == total or (total >= _SCAN_MIN_PAGES and blank >= _SCAN_SHARE * total)):
        counted = f"none of its {total:,} pages holds" if blank == total else f"{blank:,} of its {total:,} pages hold no"
        raise BookError(
            path,
            f"has no text layer: {counted} text (a scan)",
            "run OCR on it first (for example ocrmypdf) and give the OCRed PDF",
        )
    if blank:
        return [f"{blank} of {total} pages hold no text (pictures or scans); they are not read"]
    return []


def _starts(pages: PdfPages, text: PdfText, warnings: list[str]) -> tuple[list[Start], str]:
    starts = outline_starts(pages.outline, text)
    if starts:
        return starts, ""
    starts, heading_title = font_heading_starts(text)
    if starts:
        return starts, heading_title
    if len(pages.pages) > PAGES_PER_CHAPTER:
        warnings.append(
            f"has no outline (bookmarks) and no headings: a chapter mark every {PAGES_PER_CHAPTER} pages"
        )
        return page_starts(text), ""
    return [], ""


def _chapters(
    text: PdfText, starts: list[Start], title: str, options: IngestOptions, warnings: list[str]
) -> list[RawChapter]:
    chapters: list[RawChapter] = []
    left_out: list[str] = []
    for section in sections(text.blocks, starts, title):
        if not options.keep_front_matter and is_front_matter_title(section.path[-1] if section.path else ""):
            left_out.append(section.title)
            continue
        paragraphs = [block.text for block in section.blocks]
        chapters.append(RawChapter(section.title or title, paragraphs, section.path, section.lo))
    if left_out:
        warnings.append(f"left out front and back matter: {', '.join(left_out)} (--keep-front-matter reads it)")
    return chapters


def _furniture_warnings(furniture: Furniture) -> list[str]:
    if not furniture.running_heads:
        return []
    return [running_heads_warning(furniture.running_heads).replace("across chapters", "across pages")]


def _notes(furniture: Furniture, text: PdfText) -> tuple[list[Note], list[NoteRef]]:
    """The footnotes, each known by its page and mark, and the marks in the text that point to them."""
    notes = [
        Note((f"#p{note.page}-{note.label}",), note.label, list(note.paragraphs),
             bisect_right(text.pages, note.page))  # it stands after its page's text
        for note in furniture.notes
    ]
    refs = [NoteRef(f"#p{page}-{mark}", mark, block) for block, page, mark in text.marks]
    return notes, refs


def _metadata(found: dict[str, str], path: Path) -> BookMetadata:
    title = found.get("Title", "")
    if _CONVERTER_TITLE.search(title) or title.casefold() == path.stem.casefold():
        title = ""
    authors = tuple(name.strip() for name in re.split(r";|\band\b|&", found.get("Author", "")) if name.strip())
    date = _PDF_DATE.match(found.get("CreationDate", ""))
    return BookMetadata(
        title=clean_title(title),
        authors=authors,
        language=found.get("Lang", ""),
        date="-".join(part for part in date.groups() if part) if date else "",
        description=found.get("Subject", "") if found.get("Subject", "") != "unspecified" else "",
        subjects=tuple(dict.fromkeys(word.strip() for word in re.split(r"[;,]", found.get("Keywords", ""))
                                     if word.strip())),
    )

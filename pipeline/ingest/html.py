"""HTML and standalone XHTML files: one document, chapters from its headings."""

from __future__ import annotations

import codecs
import re
from dataclasses import replace
from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook, clean_title
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.plaintext import chapters_from_text_blocks
from pipeline.ingest.text_files import decode, read_text_file
from pipeline.ingest.xhtml import ExtractOptions, extract_text
from pipeline.ingest.xmlsafe import HostileXmlError, local_name, parse_html, parse_xhtml
from pipeline.types import BookMetadata


def read_html(path: Path, options: IngestOptions) -> RawBook:
    """Read an HTML or XHTML book.

    Raises:
        BookError: unreadable, hostile (entity declarations) or too large.
    """
    data = read_text_file(path, options)
    warnings: list[str] = []
    try:
        if path.suffix.lower() == ".xhtml":
            parsed = parse_xhtml(data)
            root = parsed.root
            if parsed.problem:
                warnings.append(f"malformed XHTML ({parsed.problem}); recovered what could be read")
        else:
            root = parse_html(html_text(data))
    except HostileXmlError as exc:
        raise BookError(path, f"is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        raise BookError(
            path,
            f"is not readable HTML ({' '.join(str(exc).split())[:200]})",
            "check that the file is an HTML document",
        ) from None
    language = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang") or ""
    extract = ExtractOptions(image_alt_text=options.image_alt_text, language=language, code=options.code)
    extracted = extract_text(root, extract)
    meta = _meta_tags(root)
    title, authors, chapters, furniture = chapters_from_text_blocks(
        extracted.blocks, clean_title(extracted.title), path.stem
    )
    metadata = BookMetadata(
        title=title,
        authors=tuple(filter(None, [meta.get("author", "")])) or authors,
        language=language,
        publisher=meta.get("publisher", ""),
        date=meta.get("date", "") or meta.get("dc.date", ""),
        description=meta.get("description", ""),
    )
    book = RawBook("html", metadata, chapters, warnings + furniture, notes_title=extracted.notes_title)
    book.notes = [
        replace(note, ids=tuple(f"#{element_id}" for element_id in note.ids)) for note in extracted.notes
    ]
    book.note_refs = [replace(ref, target=_fragment(ref.target)) for ref in extracted.note_refs]
    book.formulas, book.line_numbers = extracted.formulas, extracted.line_numbers
    book.left_out = extracted.left_out
    return book


def _fragment(href: str) -> str:
    """'#n1' for a reference to an element of this document; '' for one elsewhere."""
    target, _, fragment = href.partition("#")
    return f"#{fragment}" if fragment and not target else ""


_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9._-]{1,40})""", re.IGNORECASE
)


def html_text(data: bytes) -> str:
    """HTML bytes decoded by their BOM, their <meta charset>, or else by trying encodings.

    libxml2's HTML parser assumes Latin-1 when a page does not say, which garbles UTF-8 pages.
    """
    if not data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        declared = _META_CHARSET.search(data[:4096])
        if declared:
            try:
                return data.decode(codecs.lookup(declared.group(1).decode("ascii")).name, errors="replace")
            except LookupError:
                pass
    return decode(data).text


def _meta_tags(root: etree._Element) -> dict[str, str]:
    found: dict[str, str] = {}
    for element in root.iter():
        if local_name(element) == "meta" and element.get("name") and element.get("content"):
            found.setdefault(element.get("name", "").lower(), " ".join(element.get("content", "").split()))
    return found

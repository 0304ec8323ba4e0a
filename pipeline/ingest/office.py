"""What the word-processor formats share (DOCX, ODT; FB2's ZIP too): the archive opened under the
EPUB's caps, its XML members parsed by the hardened parser, Dublin Core metadata, and the book built
from a run of blocks the way TXT, Markdown and HTML build theirs (chapters at headings)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook
from pipeline.ingest.identifiers import isbn_in
from pipeline.ingest.options import IngestOptions, MiB
from pipeline.ingest.plaintext import chapters_from_text_blocks
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.ingest.xmlsafe import HostileXmlError, local_name, parse_xml
from pipeline.types import BookMetadata

MAX_PART_XML_BYTES = 16 * MiB  # styles, metadata, relationships: never the text itself
_OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # password-protected Office files, old .doc


def open_archive(path: Path, options: IngestOptions, kind: str) -> SafeZip:
    """The ZIP of a ``kind`` ('Word document', 'OpenDocument text') under the ingestion caps.

    Raises:
        BookError: too large, encrypted (an OLE container), not a ZIP, or hostile.
    """
    size = path.stat().st_size
    if size > options.max_file_bytes:
        raise BookError(
            path,
            f"is {size:,} bytes, over the {options.max_file_bytes:,}-byte limit",
            "split the book, or raise the limit with --max-book-mb",
        )
    with path.open("rb") as handle:
        head = handle.read(len(_OLE_SIGNATURE))
    if head == _OLE_SIGNATURE:
        raise BookError(
            path,
            f"is a password-protected {kind} (or an old binary format)",
            "save an unprotected copy in the current format (.docx, .odt)",
        )
    if not zipfile.is_zipfile(path):
        raise BookError(path, f"is not a {kind} (not a ZIP archive)", "re-export or re-download it")
    return SafeZip(path, options)


def read_xml(archive: SafeZip, member: str, *, max_bytes: int | None = None) -> etree._Element | None:
    """The member parsed by the hardened XML parser; None when the archive lacks it.

    Raises:
        BookError: the member is hostile, damaged or over its cap.
    """
    if not archive.has(member):
        return None
    data = archive.read(member, max_bytes=max_bytes)
    try:
        return parse_xml(data)
    except HostileXmlError as exc:
        raise BookError(archive.path, f"'{member}' is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        problem = f"'{member}' is not well-formed XML ({' '.join(str(exc).split())[:200]})"
        raise BookError(archive.path, problem, "the file is damaged; re-save it") from None


def dublin_core(root: etree._Element | None) -> dict[str, str]:
    """The first of each Dublin Core (and OpenDocument meta) field: 'title', 'creator', 'language'..."""
    found: dict[str, str] = {}
    if root is None:
        return found
    for element in root.iter():
        name = local_name(element)
        text = " ".join("".join(element.itertext()).split()) if name else ""
        if text and name == "keyword" and name in found:  # OpenDocument: one element a keyword
            found[name] += f"; {text}"
        elif text:
            found.setdefault(name, text)
    return found


def office_subjects(fields: dict[str, str]) -> tuple[str, ...]:
    """The keywords (DOCX ``cp:keywords``, ';' or ',' between them; ODT ``meta:keyword``) and the
    category, as the book's subjects."""
    found: list[str] = []
    listed = fields.get("keywords") or fields.get("keyword") or ""
    for subject in [*re.split(r"[;,]", listed), fields.get("category", "")]:
        subject = subject.strip()
        if subject and subject not in found:
            found.append(subject)
    return tuple(found)


def book_from_blocks(
    path: Path,
    format_name: str,
    blocks: list[Block],
    fields: dict[str, str],
    notes: tuple[list[Note], list[NoteRef]],
    warnings: list[str],
) -> RawBook:
    """The book of ``blocks``, chapters at its headings, titled and tagged from ``fields``."""
    title, authors, chapters, furniture = chapters_from_text_blocks(blocks, fields.get("title", ""), path.stem)
    creator = fields.get("creator") or fields.get("initial-creator") or ""
    metadata = BookMetadata(
        title=title,
        authors=tuple(name.strip() for name in creator.split(";") if name.strip()) or authors,
        language=fields.get("language", ""),
        publisher=fields.get("publisher", ""),
        date=fields.get("created") or fields.get("creation-date") or fields.get("date", ""),
        description=fields.get("description", "") or fields.get("subject", ""),
        subjects=office_subjects(fields),
        isbn=isbn_in(fields.get("identifier", "")),
    )
    book = RawBook(format_name, metadata, chapters, [*warnings, *furniture])
    book.notes, book.note_refs = notes
    return book

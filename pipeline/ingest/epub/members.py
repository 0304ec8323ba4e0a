"""An EPUB's XML members, parsed safely: a hostile member refuses the book; what a damaged one
costs depends on the member (the container and package document are required, a navigation or
content document is skipped with a warning)."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.epub.reading import Reading, first_line
from pipeline.ingest.options import MiB
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xmlsafe import HostileXmlError, parse_xhtml, parse_xml

MAX_METADATA_XML_BYTES = 16 * MiB  # container, encryption, package and navigation documents
DAMAGED_EPUB_FIX = "the EPUB is damaged; re-export it with an EPUB editor such as Sigil or Calibre"


def parse_required_xml(archive: SafeZip, member: str, path: Path) -> etree._Element:
    """``member`` parsed as XML; a member the book cannot be read without, so damage is a BookError."""
    data = archive.read(member, max_bytes=MAX_METADATA_XML_BYTES)
    try:
        return parse_xml(data)
    except HostileXmlError as exc:
        raise hostile(path, member, exc) from None
    except (etree.LxmlError, ValueError) as exc:
        problem = f"'{member}' is not well-formed XML ({first_line(exc)})"
        raise BookError(path, problem, DAMAGED_EPUB_FIX) from None


def parse_optional_xhtml(
    archive: SafeZip,
    member: str,
    reading: Reading,
    *,
    unreadable: str,
    malformed: str,
    max_bytes: int | None = None,
) -> etree._Element | None:
    """``member`` parsed as XHTML, what could be recovered of it when malformed; None when
    unreadable. Each case warns with its template, ``{member}`` and ``{problem}`` filled in."""
    data = archive.read(member, max_bytes=max_bytes)
    try:
        parsed = parse_xhtml(data)
    except HostileXmlError as exc:
        raise hostile(reading.path, member, exc) from None
    except (etree.LxmlError, ValueError) as exc:
        reading.warn(unreadable.format(member=member, problem=first_line(exc)))
        return None
    if parsed.problem:
        reading.warn(malformed.format(member=member, problem=parsed.problem))
    return parsed.root


def hostile(path: Path, member: str, exc: HostileXmlError) -> BookError:
    return BookError(path, f"'{member}' is hostile: {exc}", "refuse this file")


def element_text(element: etree._Element) -> str:
    """The element's text with white space folded, as a title or a label is read."""
    return " ".join("".join(element.itertext()).split())

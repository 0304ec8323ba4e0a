"""The spine's content documents, in reading order, as text blocks: what is read aloud."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pipeline.ingest.epub.lexicons import pronunciation_links
from pipeline.ingest.epub.members import parse_optional_xhtml
from pipeline.ingest.epub.package import Package
from pipeline.ingest.epub.reading import Reading, first_line
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import ExtractOptions, XhtmlText, extract_text

_CONTENT_TYPES = frozenset(
    ("application/xhtml+xml", "text/html", "application/xml", "text/xml", "application/x-dtbook+xml")
)


@dataclass
class SpineDocument:
    member: str
    text: XhtmlText
    offset: int  # index of its first block in the book-wide block list
    front_reason: str = ""  # why it is front or back matter ('' when it is read); set by chapters
    lexicons: list[str] = field(default_factory=list)  # the pronunciation lexicons it links


def spine_documents(
    archive: SafeZip, package: Package, options: IngestOptions, reading: Reading, language: str = ""
) -> list[SpineDocument]:
    """Every readable spine document once, in spine order. A non-linear one (a pop-up note, an
    answer key) is read only when asked for, except for the notes it holds: those are always kept."""
    extract = ExtractOptions(image_alt_text=options.image_alt_text, language=language, code=options.code)
    docs: list[SpineDocument] = []
    seen: set[str] = set()
    offset = 0
    for item, linear in package.spine:
        if item.member in seen:
            continue
        seen.add(item.member)
        if item.media_type and item.media_type not in _CONTENT_TYPES:
            continue  # an image or PDF in the spine: nothing to read aloud
        if not archive.has(item.member):
            reading.warn(f"spine item '{item.member}' is missing from the archive; skipped")
            continue
        read = _document_text(archive, item.member, extract, reading)
        if read is None:
            continue
        text, lexicons = read
        if not linear and not options.include_nonlinear:
            if not text.notes:
                continue
            notes = [replace(note, at=0) for note in text.notes]
            text = replace(text, blocks=[], anchors={}, notes=notes)  # its notes only
        docs.append(SpineDocument(item.member, text, offset, lexicons=lexicons))
        offset += len(text.blocks)
    return docs


def _document_text(
    archive: SafeZip, member: str, extract: ExtractOptions, reading: Reading
) -> tuple[XhtmlText, list[str]] | None:
    """The document's text, and the pronunciation lexicons it links; None when it is unreadable."""
    root = parse_optional_xhtml(
        archive,
        member,
        reading,
        unreadable="'{member}' could not be read at all ({problem}); skipped",
        malformed="'{member}' is malformed XHTML ({problem}); recovered what could be read",
    )
    if root is None:
        return None
    links = pronunciation_links(root, member)  # before the text is taken out of the tree
    try:
        return extract_text(root, extract), links
    except ValueError as exc:  # text that lxml cannot decode, left in a recovered tree
        reading.warn(f"'{member}' holds undecodable text ({first_line(exc)}); skipped")
        return None

"""A read-along edition of a book that has no XHTML of its own (TXT, Markdown, HTML): one simple
XHTML document per chapter (its title as a heading, a paragraph per paragraph, each in the words
ingestion read from the file), a navigation document of the chapters, the cover and metadata."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from lxml import etree

from pipeline.readalong.edition import Edition, Marked, fragment_id
from pipeline.readalong.package import OPF, new_package, relative
from pipeline.readalong.timings import BookTimings
from pipeline.types import Book, BookMetadata

OPF_MEMBER = "OEBPS/content.opf"
NAV_MEMBER = "OEBPS/nav.xhtml"
CONTAINER = b"""<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""
_COVERS = {"image/jpeg": "jpg", "image/png": "png", "image/gif": "gif"}  # EPUB 3's core image types
_W3C_DATE = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")
Spans = dict[int, list[tuple[int, int, str]]]  # paragraph (-1: title) -> (start, end, fragment id)


def generated_edition(book: Book, timings: BookTimings, identifier: str) -> Edition:
    """The edition's documents, with every timed sentence that has written words marked."""
    metadata = book.metadata
    language = metadata.language or "und"
    package = new_package(identifier, metadata.title, language, _fields(metadata))
    edition = Edition(OPF_MEMBER, package, {"META-INF/container.xml": CONTAINER})
    stylesheet = edition.member("readalong.css")
    spans_by_chapter = _spans(timings, edition.marked)
    documents = []
    for chapter in book.chapters:
        member = f"OEBPS/text/chapter_{chapter.index + 1:04d}.xhtml"
        spans = spans_by_chapter.get(chapter.index, {})
        for key, (_, fragment) in list(edition.marked.items()):
            if key[0] == chapter.index:
                edition.marked[key] = (member, fragment)
        heading = _marked(chapter.title, spans.get(-1, []))
        body = [f"<h1>{heading}</h1>"]
        body += [
            f"<p>{_marked(text, spans.get(number, []))}</p>" for number, text in enumerate(chapter.paragraphs)
        ]
        section = '<section epub:type="chapter">\n' + "\n".join(body) + "\n</section>"
        edition.files[member] = _document(chapter.title, language, section, relative(member, stylesheet))
        edition.order[member] = [fragment for number in sorted(spans) for _, _, fragment in spans[number]]
        documents.append((member, chapter.title))
    edition.files[NAV_MEMBER] = _navigation(documents, language)
    _declare(package, documents, metadata, edition)
    return edition


def _fields(metadata: BookMetadata) -> list[tuple[str, str]]:
    fields = [("creator", author) for author in metadata.authors]
    if metadata.publisher:
        fields.append(("publisher", metadata.publisher))
    if _W3C_DATE.match(metadata.date.strip()):
        fields.append(("date", metadata.date.strip()))
    if metadata.description:
        fields.append(("description", metadata.description))
    return fields


def _spans(timings: BookTimings, marked: Marked) -> dict[int, Spans]:
    """The sentences to mark in each chapter's paragraphs; each is recorded in ``marked``."""
    found: dict[int, Spans] = {}
    for chapter in timings.chapters:
        own: Spans = found.setdefault(chapter.index, {})
        for sentence in chapter.sentences:
            if sentence.written is None:
                continue
            fragment = fragment_id(chapter.index, sentence.index)
            own.setdefault(sentence.paragraph, []).append(
                (sentence.written.start, sentence.written.end, fragment)
            )
            marked[chapter.index, sentence.index] = ("", fragment)
    return found


def _marked(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` as XHTML with each span wrapped in a ``<span id>``."""
    parts, at = [], 0
    for start, end, fragment in sorted(spans):
        parts.append(escape(text[at:start]))
        parts.append(f'<span id="{fragment}">{escape(text[start:end])}</span>')
        at = end
    parts.append(escape(text[at:]))
    return "".join(parts)


def _document(title: str, language: str, body: str, stylesheet: str = "") -> bytes:
    link = f'<link rel="stylesheet" type="text/css" href={quoteattr(stylesheet)}/>\n' if stylesheet else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f"lang={quoteattr(language)} xml:lang={quoteattr(language)}>\n"
        f'<head>\n<meta charset="utf-8"/>\n<title>{escape(title or "Untitled")}</title>\n{link}</head>\n'
        f"<body>\n{body}\n</body>\n</html>\n"
    ).encode("utf-8")


def _navigation(documents: list[tuple[str, str]], language: str) -> bytes:
    entries = "\n".join(
        f"<li><a href={quoteattr(relative(NAV_MEMBER, member))}>{escape(title or 'Untitled')}</a></li>"
        for member, title in documents
    )
    body = f'<nav epub:type="toc" id="toc">\n<h1>Contents</h1>\n<ol>\n{entries}\n</ol>\n</nav>'
    return _document("Contents", language, body)


def _declare(
    package: etree._Element, documents: list[tuple[str, str]], metadata: BookMetadata, edition: Edition
) -> None:
    """The documents, navigation and cover in the manifest; the chapters in the spine."""
    manifest = next(child for child in package if child.tag == f"{{{OPF}}}manifest")
    spine = next(child for child in package if child.tag == f"{{{OPF}}}spine")
    etree.SubElement(
        manifest,
        f"{{{OPF}}}item",
        {
            "id": "nav",
            "href": relative(OPF_MEMBER, NAV_MEMBER),
            "media-type": "application/xhtml+xml",
            "properties": "nav",
        },
    )
    for number, (member, _) in enumerate(documents, start=1):
        etree.SubElement(
            manifest,
            f"{{{OPF}}}item",
            {
                "id": f"chapter-{number}",
                "href": relative(OPF_MEMBER, member),
                "media-type": "application/xhtml+xml",
            },
        )
        etree.SubElement(spine, f"{{{OPF}}}itemref", {"idref": f"chapter-{number}"})
    extension = _COVERS.get(metadata.cover_mime)
    if metadata.cover and extension:
        member = f"OEBPS/images/cover.{extension}"
        edition.files[member] = metadata.cover
        etree.SubElement(
            manifest,
            f"{{{OPF}}}item",
            {
                "id": "cover-image",
                "href": relative(OPF_MEMBER, member),
                "media-type": metadata.cover_mime,
                "properties": "cover-image",
            },
        )

"""A read-along edition of an EPUB: the book's own members (content documents, styles, images,
fonts, navigation, metadata), with the spoken sentences marked in the documents that hold them.

Each such document is read again as ingestion read it (``pipeline.ingest.xhtml``, now recording
where each character comes from), so a sentence's place (block and offsets) finds its characters
in the tree; a sentence whose text there is not the text recorded for it is left unmarked, never
marked in the wrong place. What is not read aloud (notes left out, line numbers, running heads,
front matter) is left as it is. An EPUB 2 becomes an EPUB 3 (media overlays exist only there): its
documents get the HTML5 doctype and a navigation document is made from its NCX.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from lxml import etree

from pipeline.ingest.epub.container import package_document_member
from pipeline.ingest.epub.members import MAX_METADATA_XML_BYTES, element_text, parse_required_xml
from pipeline.ingest.epub.metadata import read_metadata
from pipeline.ingest.epub.package import Package, href_target, read_package
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import ExtractOptions, extract_text
from pipeline.ingest.xmlsafe import local_name, parse_xhtml, parse_xml
from pipeline.readalong.edition import Edition, fragment_id, xhtml_bytes
from pipeline.readalong.marking import XHTML, SentenceMark, mark_sentences
from pipeline.readalong.overlays import longest_rising
from pipeline.readalong.package import relative, upgrade_to_epub3
from pipeline.readalong.timings import BookTimings
from pipeline.types import TextPlace


@dataclass(frozen=True)
class _Wanted:
    chapter: int
    sentence: int
    place: TextPlace
    text: str


def source_edition(timings: BookTimings, source: Path, reading: IngestOptions) -> Edition:
    """The edition of the EPUB at ``source``, read with the options ingestion used."""
    read = Reading(source)
    with SafeZip(source, reading) as archive:
        opf_member = package_document_member(archive, source)
        package = read_package(archive, source, opf_member, read)
        language = read_metadata(archive, package, source, read).language
        edition = Edition(opf_member, parse_required_xml(archive, opf_member, source), {})
        extract = ExtractOptions(image_alt_text=reading.image_alt_text, language=language, code=reading.code)
        wanted = _wanted_by_document(timings)
        upgrade = not package.version.strip().startswith("3")
        documents = {
            item.member for item in package.manifest.values() if item.media_type == "application/xhtml+xml"
        }
        for name in archive.names():
            if name in ("mimetype", opf_member) or name.endswith("/"):
                continue
            data = archive.read(name)
            if name in wanted or (upgrade and name in documents):
                data = _rewritten(data, name, wanted.get(name, []), edition, extract)
            edition.files[name] = data
        if upgrade:
            nav = edition.member("nav.xhtml")
            edition.files[nav] = _navigation_from_ncx(archive, package, nav, language)
            upgrade_to_epub3(edition.package, opf_member, nav)
    return edition


def _wanted_by_document(timings: BookTimings) -> dict[str, list[_Wanted]]:
    wanted: dict[str, list[_Wanted]] = {}
    for chapter in timings.chapters:
        for sentence in chapter.sentences:
            written = sentence.written
            if written is not None and written.place is not None:
                wanted.setdefault(written.place.document, []).append(
                    _Wanted(chapter.index, sentence.index, written.place, written.text)
                )
    return wanted


def _rewritten(
    data: bytes, member: str, wanted: list[_Wanted], edition: Edition, extract: ExtractOptions
) -> bytes:
    """The document with the ``wanted`` sentences marked (as found), in EPUB 3's syntax."""
    root = parse_xhtml(data).root
    text = extract_text(root, extract, track=True)
    blocks = {block.number: block.text for block in text.blocks}
    for note in text.notes:
        for paragraph, source in zip(note.paragraphs, note.sources, strict=False):
            if source is not None:
                blocks[source.place.block] = paragraph
    taken = set(root.xpath("//@id"))
    marks, keys = [], {}
    heard = _heard_in_order(wanted)
    edition.unmarked += len(wanted) - len(heard)
    for item in heard:
        block = blocks.get(item.place.block)
        if block is None or block[item.place.start : item.place.end] != item.text:
            edition.unmarked += 1
            continue
        fragment = fragment_id(item.chapter, item.sentence)
        while fragment in taken:
            fragment += "x"
        taken.add(fragment)
        keys[fragment] = (item.chapter, item.sentence)
        marks.append(SentenceMark(fragment, item.place.block, item.place.start, item.place.end))
    done = mark_sentences(text.origins, marks)
    edition.unmarked += len(marks) - len(done)
    for fragment in done:
        edition.marked[keys[fragment]] = (member, fragment)
    edition.order[member] = [
        span.get("id") for span in root.iter(f"{{{XHTML}}}span") if span.get("id") in done
    ]
    if done:
        _link_stylesheet(root, relative(member, edition.member("readalong.css")))
    return xhtml_bytes(root)


def _heard_in_order(wanted: list[_Wanted]) -> list[_Wanted]:
    """The sentences to mark, in the document's order, less those a chapter reads out of that order
    (an overlay plays its pars in the document's order, and a chapter's audio must never go
    backwards): of each chapter's, the longest run in both orders is kept; the rest are heard
    within a neighbour's clip."""
    in_text = sorted(wanted, key=lambda item: (item.place.block, item.place.start))
    by_chapter: dict[int, list[int]] = {}
    for item in in_text:
        by_chapter.setdefault(item.chapter, []).append(item.sentence)
    kept = {chapter: longest_rising(sentences) for chapter, sentences in by_chapter.items()}
    return [item for item in in_text if item.sentence in kept[item.chapter]]


def _link_stylesheet(root: etree._Element, href: str) -> None:
    head = next((child for child in root if local_name(child) == "head"), None)
    if head is None:
        head = etree.Element(f"{{{XHTML}}}head")
        root.insert(0, head)
    etree.SubElement(head, f"{{{XHTML}}}link", {"rel": "stylesheet", "type": "text/css", "href": href})


def _navigation_from_ncx(archive: SafeZip, package: Package, nav: str, language: str) -> bytes:
    """An EPUB 3 navigation document with the NCX's entries, nested as they are there."""
    ncx = package.manifest.get(package.ncx_id) or next(
        (item for item in package.manifest.values() if item.media_type == "application/x-dtbncx+xml"), None
    )
    entries = ""
    if ncx is not None and ncx.member and archive.has(ncx.member):
        root = parse_xml(archive.read(ncx.member, max_bytes=MAX_METADATA_XML_BYTES))
        nav_map = next((element for element in root.iter() if local_name(element) == "navmap"), None)
        if nav_map is not None:
            entries = _nav_list(nav_map, ncx.member, nav)
    if not entries:  # no usable NCX: the first document of the spine stands for the book
        first = package.spine[0][0].member
        entries = f"<ol><li><a href={quoteattr(relative(nav, first))}>Start</a></li></ol>"
    lang = quoteattr(language or "und")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f'lang={lang} xml:lang={lang}>\n<head><meta charset="utf-8"/><title>Contents</title></head>\n'
        f'<body>\n<nav epub:type="toc" id="toc"><h1>Contents</h1>{entries}</nav>\n</body>\n</html>\n'
    ).encode("utf-8")


def _nav_list(parent: etree._Element, ncx_member: str, nav: str) -> str:
    items = []
    for point in parent:
        if local_name(point) != "navpoint":
            continue
        label = next((element_text(child) for child in point if local_name(child) == "navlabel"), "")
        src = next((child.get("src", "") for child in point if local_name(child) == "content"), "")
        target = href_target(ncx_member, src) if src else ""
        if not target:
            continue
        member, _, fragment = target.partition("#")
        href = relative(nav, member) + (f"#{fragment}" if fragment else "")
        children = _nav_list(point, ncx_member, nav)
        items.append(
            f"<li><a href={quoteattr(href)}>{escape(label or posixpath.basename(member))}</a>{children}</li>"
        )
    return f"<ol>{''.join(items)}</ol>" if items else ""

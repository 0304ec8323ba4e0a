"""EPUB 2 and 3: container → package document → spine, chapters from the nav document or NCX.

Reading order is the spine's. Chapter boundaries and titles come from the table of contents (EPUB 3
nav, else EPUB 2 NCX), including entries that point into the middle of a file; a file without an
entry of its own continues the chapter before it. Without a usable table of contents, each spine
document is a chapter (split further at its headings when it holds several chapters).
"""

from __future__ import annotations

import logging
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import (
    RawBook,
    RawChapter,
    Section,
    Start,
    clean_title,
    heading_starts,
    is_front_matter_title,
    sections,
    title_key,
)
from pipeline.ingest.options import IngestOptions, MiB
from pipeline.ingest.safezip import SafeZip, resolve_href
from pipeline.ingest.xhtml import EPUB_TYPE, Block, ExtractOptions, XhtmlText, extract_text
from pipeline.ingest.xmlsafe import HostileXmlError, local_name, parse_xhtml, parse_xml
from pipeline.types import BookMetadata

logger = logging.getLogger(__name__)

_OPF_NS = "{http://www.idpf.org/2007/opf}"
_CONTENT_TYPES = frozenset(
    ("application/xhtml+xml", "text/html", "application/xml", "text/xml", "application/x-dtbook+xml")
)
_IMAGE_MAGIC = {
    b"\xff\xd8\xff": "image/jpeg",
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}
_MAX_COVER_BYTES = 32 * MiB
_MAX_METADATA_XML_BYTES = 16 * MiB
# epub:type values (and EPUB 2 guide types) of pages that are not read by default.
_FRONT_MATTER_TYPES = frozenset(
    [
        "cover",
        "titlepage",
        "title-page",
        "halftitlepage",
        "halftitle",
        "copyright-page",
        "copyright",
        "toc",
        "loi",
        "lot",
        "lof",
        "index",
        "colophon",
        "imprint",
        "seriespage",
        "other-credits",
        "landmarks",
        "page-list",
        "doc-toc",
        "doc-index",
        "doc-colophon",
        "doc-pagelist",
    ]
)
_FONT_EXTENSIONS = (".ttf", ".otf", ".woff", ".woff2", ".eot")
_FONT_OBFUSCATION = frozenset(("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"))
_DRM_MARKERS = {
    "META-INF/rights.xml": "Adobe ADEPT",
    "META-INF/license.lcpl": "Readium LCP",
    "META-INF/sinf.xml": "Apple FairPlay",
}
_COPYRIGHT_SIGNS = re.compile(
    r"©|\(c\)\s*\d{4}|copyright|all rights reserved|isbn|first published|published by|printed in"
    r"|版权所有|版權所有|著作权|著作權|出版社|印刷|书号|書號",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ManifestItem:
    id: str
    member: str  # archive path ('' when the href leaves the archive)
    media_type: str
    properties: frozenset[str]


@dataclass(frozen=True)
class TocEntry:
    path: tuple[str, ...]  # this entry's title, prefixed by its ancestors'
    member: str
    fragment: str


@dataclass
class Package:
    opf_member: str
    version: str
    metadata: etree._Element | None
    manifest: dict[str, ManifestItem]
    spine: list[tuple[ManifestItem, bool]]  # (item, linear)
    ncx_id: str
    guide: list[tuple[str, str]]  # (type, member#fragment)


@dataclass
class _Doc:
    member: str
    text: XhtmlText
    offset: int  # index of its first block in the book-wide block list
    front_reason: str = ""


@dataclass
class _Reading:
    """Warnings gathered while reading one EPUB."""

    path: Path
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        logger.warning("%s: %s", self.path, message)
        self.warnings.append(message)


def read_epub(path: Path, options: IngestOptions) -> RawBook:
    """Read an EPUB into metadata and chapters.

    Raises:
        BookError: not a ZIP, hostile, DRM-protected, or missing its container or package document.
    """
    reading = _Reading(path)
    with SafeZip(path, options) as archive:
        _check_mimetype(archive, reading)
        _refuse_drm(archive, path)
        opf_member = _rootfile(archive, path)
        package = _package(archive, path, opf_member, reading)
        metadata = _metadata(archive, package, path, reading)
        toc, front_members = _safe_table_of_contents(archive, package, path, reading)
        docs = _spine_documents(archive, package, options, path, reading)
    chapters = _chapters(docs, toc, front_members, metadata.title, options, reading)
    return RawBook("epub", metadata, chapters, reading.warnings)


# --- container, DRM, package document -------------------------------------------------------------


def _check_mimetype(archive: SafeZip, reading: _Reading) -> None:
    if not archive.has("mimetype"):
        reading.warn("no 'mimetype' member; reading it as an EPUB anyway")
        return
    try:
        mimetype = archive.read("mimetype", max_bytes=1024).strip()
    except BookError:
        raise BookError(
            reading.path,
            "the 'mimetype' member is oversized or damaged, so this is not a sound EPUB",
            "a hostile or damaged file; refuse it",
        ) from None
    if mimetype != b"application/epub+zip":
        reading.warn(
            f"'mimetype' says {mimetype[:60]!r}, not application/epub+zip; reading it as an EPUB anyway"
        )


def _refuse_drm(archive: SafeZip, path: Path) -> None:
    for member, scheme in _DRM_MARKERS.items():
        if archive.has(member):
            raise _drm(path, f"{scheme} ({member})")
    if not archive.has("META-INF/encryption.xml"):
        return
    try:
        root = parse_xml(archive.read("META-INF/encryption.xml", max_bytes=_MAX_METADATA_XML_BYTES))
    except (etree.LxmlError, ValueError):
        raise _drm(path, "an unreadable META-INF/encryption.xml") from None
    for encrypted in root.iter("{*}EncryptedData"):
        method = next(encrypted.iter("{*}EncryptionMethod"), None)
        algorithm = method.get("Algorithm", "") if method is not None else ""
        reference = next(encrypted.iter("{*}CipherReference"), None)
        uri = unquote(reference.get("URI", "")) if reference is not None else ""
        is_font = uri.lower().endswith(_FONT_EXTENSIONS) and algorithm in _FONT_OBFUSCATION
        if not is_font:  # font obfuscation is harmless; anything else hides the text
            raise _drm(path, f"META-INF/encryption.xml encrypting '{uri or 'content'}'")


def _drm(path: Path, detail: str) -> BookError:
    return BookError(path, f"DRM-protected: {detail}", "use a DRM-free copy of the book")


def _rootfile(archive: SafeZip, path: Path) -> str:
    if not archive.has("META-INF/container.xml"):
        raise BookError(
            path,
            "META-INF/container.xml is missing, so the package document cannot be found",
            "the EPUB is damaged; re-export it with an EPUB editor such as Sigil or Calibre",
        )
    root = _parse_required(archive, "META-INF/container.xml", path)
    candidates = [rootfile for rootfile in root.iter("{*}rootfile") if rootfile.get("full-path")]
    preferred = [r for r in candidates if r.get("media-type", "") in ("application/oebps-package+xml", "")]
    for rootfile in preferred or candidates:
        member = unquote(rootfile.get("full-path", "")).lstrip("/")
        if archive.has(member):
            return member
    named = candidates[0].get("full-path") if candidates else None
    problem = (
        f"META-INF/container.xml names package document '{named}', which is not in the archive"
        if named
        else "META-INF/container.xml names no package document"
    )
    raise BookError(
        path, problem, "the EPUB is damaged; re-export it with an EPUB editor such as Sigil or Calibre"
    )


def _parse_required(archive: SafeZip, member: str, path: Path) -> etree._Element:
    data = archive.read(member, max_bytes=_MAX_METADATA_XML_BYTES)
    try:
        return parse_xml(data)
    except HostileXmlError as exc:
        raise BookError(path, f"'{member}' is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        raise BookError(
            path,
            f"'{member}' is not well-formed XML ({_first_line(exc)})",
            "the EPUB is damaged; re-export it with an EPUB editor such as Sigil or Calibre",
        ) from None


def _package(archive: SafeZip, path: Path, opf_member: str, reading: _Reading) -> Package:
    root = _parse_required(archive, opf_member, path)
    if local_name(root) != "package":
        raise BookError(
            path,
            f"'{opf_member}' is not an OPF package document",
            "the EPUB is damaged; re-export it with an EPUB editor such as Sigil or Calibre",
        )
    sections_by_name = {local_name(child): child for child in root if local_name(child)}
    manifest = _manifest(sections_by_name.get("manifest"), opf_member, reading)
    spine_element = sections_by_name.get("spine")
    spine: list[tuple[ManifestItem, bool]] = []
    ncx_id = ""
    if spine_element is not None:
        ncx_id = spine_element.get("toc", "")
        for itemref in spine_element:
            item = manifest.get(itemref.get("idref", "")) if local_name(itemref) == "itemref" else None
            if item is not None and item.member:
                spine.append((item, itemref.get("linear", "yes").strip().lower() != "no"))
    if not spine:
        raise BookError(
            path,
            f"the package document '{opf_member}' has an empty spine (no reading order)",
            "the EPUB is damaged or empty; re-export it with an EPUB editor such as Sigil or Calibre",
        )
    guide = []
    guide_element = sections_by_name.get("guide")
    if guide_element is not None:
        for reference in guide_element:
            member = _href_target(opf_member, reference.get("href", ""))
            if member:
                guide.append((reference.get("type", "").lower(), member))
    return Package(
        opf_member, root.get("version", ""), sections_by_name.get("metadata"), manifest, spine, ncx_id, guide
    )


def _manifest(element: etree._Element | None, opf_member: str, reading: _Reading) -> dict[str, ManifestItem]:
    items: dict[str, ManifestItem] = {}
    if element is None:
        return items
    for item in element:
        if local_name(item) != "item" or not item.get("id"):
            continue
        href = item.get("href", "")
        member = _href_target(opf_member, href).partition("#")[0]
        if not member:
            reading.warn(f"manifest item '{href[:80]}' points outside the book; ignored")
        items[item.get("id", "")] = ManifestItem(
            item.get("id", ""),
            member,
            item.get("media-type", "").lower(),
            frozenset(item.get("properties", "").split()),
        )
    return items


def _href_target(base_member: str, href: str) -> str:
    """'dir/file.xhtml#frag' for an href found in ``base_member``; '' when it leaves the archive."""
    href = href.strip()
    target, _, fragment = href.partition("#")
    if not target:
        return f"{base_member}#{fragment}" if fragment else ""
    member = resolve_href(base_member, unquote(target.partition("?")[0]))
    if member is None:
        return ""
    return f"{member}#{fragment}" if fragment else member


# --- metadata ---------------------------------------------------------------------------------------


def _metadata(archive: SafeZip, package: Package, path: Path, reading: _Reading) -> BookMetadata:
    fields: dict[str, list[etree._Element]] = {}
    refines: dict[str, dict[str, str]] = {}
    legacy_cover = ""
    if package.metadata is not None:
        for element in package.metadata.iter():
            name = local_name(element)
            if name == "meta":
                if element.get("refines") and element.get("property"):
                    refined = refines.setdefault(element.get("refines", "").lstrip("#"), {})
                    refined[element.get("property", "")] = (element.text or "").strip()
                elif element.get("name") == "cover":
                    legacy_cover = element.get("content", "")
            elif name:
                fields.setdefault(name, []).append(element)
    title = _main_title(fields.get("title", []), refines) or path.stem
    cover, cover_mime = _cover(archive, package, legacy_cover, reading)
    return BookMetadata(
        title=title,
        authors=_authors(fields.get("creator", []), refines),
        language=_first_text(fields.get("language", [])),
        publisher=_first_text(fields.get("publisher", [])),
        date=_first_text(fields.get("date", [])),
        description=_plain_description(_first_text(fields.get("description", []))),
        cover=cover,
        cover_mime=cover_mime,
    )


def _text_of(element: etree._Element) -> str:
    return " ".join("".join(element.itertext()).split())


def _first_text(elements: list[etree._Element]) -> str:
    for element in elements:
        if text := _text_of(element):
            return text
    return ""


def _main_title(titles: list[etree._Element], refines: dict[str, dict[str, str]]) -> str:
    for element in titles:
        if refines.get(element.get("id", ""), {}).get("title-type") == "main" and _text_of(element):
            return _text_of(element)
    return _first_text(titles)


def _authors(creators: list[etree._Element], refines: dict[str, dict[str, str]]) -> tuple[str, ...]:
    named = [(element, _creator_role(element, refines)) for element in creators if _text_of(element)]
    if any(role for _, role in named):
        named = [(element, role) for element, role in named if role in ("", "aut")]
    authors: list[str] = []
    for element, _ in named:
        if _text_of(element) not in authors:
            authors.append(_text_of(element))
    return tuple(authors)


def _creator_role(element: etree._Element, refines: dict[str, dict[str, str]]) -> str:
    role = element.get(f"{_OPF_NS}role") or element.get("role") or ""
    return (role or refines.get(element.get("id", ""), {}).get("role", "")).strip().lower()


def _plain_description(text: str) -> str:
    if "<" not in text:
        return text
    return " ".join(re.sub(r"<[^>]{0,2000}>", " ", text).split())


def _cover(
    archive: SafeZip, package: Package, legacy_cover: str, reading: _Reading
) -> tuple[bytes | None, str]:
    item = _cover_item(package, legacy_cover)
    if item is None or not archive.has(item.member):
        return None, ""
    try:
        data = archive.read(item.member, max_bytes=_MAX_COVER_BYTES)
    except BookError as exc:
        reading.warn(f"cover image left out: {exc.problem}")
        return None, ""
    mime = _sniff_image(data)
    if not mime:
        reading.warn(f"cover '{item.member}' is not a JPEG, PNG, GIF or WebP image; left out")
        return None, ""
    return data, mime


def _cover_item(package: Package, legacy_cover: str) -> ManifestItem | None:
    images = [
        item for item in package.manifest.values() if item.media_type.startswith("image/") and item.member
    ]
    for item in images:
        if "cover-image" in item.properties:
            return item
    if legacy_cover:
        item = package.manifest.get(legacy_cover)
        if item is not None and item.member:
            return item
        for item in images:  # some books put the href, not the id, in <meta name="cover">
            if item.member.endswith(legacy_cover):
                return item
    for item in images:
        if "cover" in item.id.lower() or "cover" in posixpath.basename(item.member).lower():
            return item
    return None


def _sniff_image(data: bytes) -> str:
    for magic, mime in _IMAGE_MAGIC.items():
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


# --- table of contents --------------------------------------------------------------------------------


def _table_of_contents(
    archive: SafeZip, package: Package, path: Path, reading: _Reading
) -> tuple[list[TocEntry], dict[str, str]]:
    """Entries from the EPUB 3 nav document, else the NCX; and members that are front matter."""
    front = {
        member: kind for kind, member in package.guide if kind in _FRONT_MATTER_TYPES or kind == "title-page"
    }
    entries: list[TocEntry] = []
    nav = next((item for item in package.manifest.values() if "nav" in item.properties and item.member), None)
    if nav is not None and archive.has(nav.member):
        root = _parse_navigation(archive, nav.member, path, reading)
        if root is not None:
            entries, landmarks = _nav_entries(root, nav.member)
            front.update(landmarks)
            front.setdefault(nav.member, "toc")
    if not entries:
        ncx = package.manifest.get(package.ncx_id) or next(
            (item for item in package.manifest.values() if item.media_type == "application/x-dtbncx+xml"),
            None,
        )
        if ncx is not None and ncx.member and archive.has(ncx.member):
            root = _parse_navigation(archive, ncx.member, path, reading)
            if root is not None:
                entries = _ncx_entries(root, ncx.member)
    return entries, front


def _safe_table_of_contents(
    archive: SafeZip, package: Package, path: Path, reading: _Reading
) -> tuple[list[TocEntry], dict[str, str]]:
    try:
        return _table_of_contents(archive, package, path, reading)
    except ValueError as exc:  # undecodable text left in a recovered navigation document
        reading.warn(f"the table of contents is unreadable ({_first_line(exc)}); chapters follow the spine")
        return [], {}


def _parse_navigation(archive: SafeZip, member: str, path: Path, reading: _Reading) -> etree._Element | None:
    try:
        parsed = parse_xhtml(archive.read(member, max_bytes=_MAX_METADATA_XML_BYTES))
    except HostileXmlError as exc:
        raise BookError(path, f"'{member}' is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        reading.warn(f"table of contents '{member}' is unreadable ({_first_line(exc)}); using the spine")
        return None
    if parsed.problem:
        reading.warn(
            f"table of contents '{member}' is malformed ({parsed.problem}); recovered what could be read"
        )
    return parsed.root


def _nav_entries(root: etree._Element, nav_member: str) -> tuple[list[TocEntry], dict[str, str]]:
    navs = [element for element in root.iter() if local_name(element) == "nav"]
    typed = {
        id(nav): set((nav.get(EPUB_TYPE, "") + " " + nav.get("role", "")).lower().split()) for nav in navs
    }
    landmarks: dict[str, str] = {}
    for nav in navs:
        if typed[id(nav)] & {"landmarks", "doc-landmarks"}:
            for link in nav.iter():
                kind = (link.get(EPUB_TYPE, "") or "").lower()
                member = _href_target(nav_member, link.get("href", "")) if local_name(link) == "a" else ""
                if member and set(kind.split()) & _FRONT_MATTER_TYPES:
                    landmarks[member] = kind
    toc = [nav for nav in navs if typed[id(nav)] & {"toc", "doc-toc"}]
    if not toc:
        toc = [
            nav
            for nav in navs
            if not typed[id(nav)] & {"landmarks", "page-list", "doc-landmarks", "doc-pagelist"}
        ]
    entries: list[TocEntry] = []
    if toc:
        for child in toc[0]:
            if local_name(child) == "ol" or local_name(child) == "ul":
                _nav_list(child, (), nav_member, entries)
    return entries, landmarks


def _nav_list(
    list_element: etree._Element, parents: tuple[str, ...], nav_member: str, entries: list[TocEntry]
) -> None:
    for item in list_element:
        if local_name(item) != "li":
            continue
        label, href, children = "", "", None
        for child in item:
            name = local_name(child)
            if name in ("a", "span") and not label:
                label = _text_of(child)
                href = child.get("href", "") if name == "a" else ""
            elif name in ("ol", "ul"):
                children = child
        path = parents + (label,)
        target = _href_target(nav_member, href) if href else ""
        if target:
            member, _, fragment = target.partition("#")
            entries.append(TocEntry(path, member, fragment))
        if children is not None and len(entries) < 100_000:
            _nav_list(children, path, nav_member, entries)


def _ncx_entries(root: etree._Element, ncx_member: str) -> list[TocEntry]:
    entries: list[TocEntry] = []
    nav_map = next((element for element in root.iter() if local_name(element) == "navmap"), None)
    if nav_map is not None:
        _ncx_points(nav_map, (), ncx_member, entries)
    return entries


def _ncx_points(
    parent: etree._Element, parents: tuple[str, ...], ncx_member: str, entries: list[TocEntry]
) -> None:
    for point in parent:
        if local_name(point) != "navpoint":
            continue
        label, src = "", ""
        for child in point:
            name = local_name(child)
            if name == "navlabel" and not label:
                label = _text_of(child)
            elif name == "content":
                src = child.get("src", "")
        path = parents + (label,)
        target = _href_target(ncx_member, src) if src else ""
        if target:
            member, _, fragment = target.partition("#")
            entries.append(TocEntry(path, member, fragment))
        if len(entries) < 100_000:
            _ncx_points(point, path, ncx_member, entries)


# --- spine documents ------------------------------------------------------------------------------------


def _spine_documents(
    archive: SafeZip, package: Package, options: IngestOptions, path: Path, reading: _Reading
) -> list[_Doc]:
    extract = ExtractOptions(
        image_alt_text=options.image_alt_text, include_footnotes=options.include_footnotes
    )
    docs: list[_Doc] = []
    seen: set[str] = set()
    offset = 0
    for item, linear in package.spine:
        if (not linear and not options.include_nonlinear) or item.member in seen:
            continue
        seen.add(item.member)
        if item.media_type and item.media_type not in _CONTENT_TYPES:
            continue  # an image or PDF in the spine: nothing to read aloud
        if not archive.has(item.member):
            reading.warn(f"spine item '{item.member}' is missing from the archive; skipped")
            continue
        text = _document_text(archive, item.member, extract, path, reading)
        if text is None:
            continue
        docs.append(_Doc(item.member, text, offset))
        offset += len(text.blocks)
    return docs


def _document_text(
    archive: SafeZip, member: str, extract: ExtractOptions, path: Path, reading: _Reading
) -> XhtmlText | None:
    data = archive.read(member)
    try:
        parsed = parse_xhtml(data)
    except HostileXmlError as exc:
        raise BookError(path, f"'{member}' is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        reading.warn(f"'{member}' could not be read at all ({_first_line(exc)}); skipped")
        return None
    if parsed.problem:
        reading.warn(f"'{member}' is malformed XHTML ({parsed.problem}); recovered what could be read")
    try:
        return extract_text(parsed.root, extract)
    except ValueError as exc:  # text that lxml cannot decode, left in a recovered tree
        reading.warn(f"'{member}' holds undecodable text ({_first_line(exc)}); skipped")
        return None


# --- chapters -------------------------------------------------------------------------------------------


def _chapters(
    docs: list[_Doc],
    toc: list[TocEntry],
    front_members: dict[str, str],
    book_title: str,
    options: IngestOptions,
    reading: _Reading,
) -> list[RawChapter]:
    blocks: list[Block] = [block for doc in docs for block in doc.text.blocks]
    for doc in docs:
        doc.front_reason = _front_reason_of_document(doc, front_members)
    starts = _toc_starts(docs, toc)
    if not _toc_usable(starts, docs):
        if toc:
            logger.info(
                "%s: table of contents does not match the spine; chapters follow the spine", reading.path
            )
        starts = _spine_starts(docs, blocks)
    else:
        starts = _with_untitled_documents(docs, starts)
    found = sections(blocks, starts, book_title)
    return _keep_readable(found, docs, book_title, options, reading)


def _toc_starts(docs: list[_Doc], toc: list[TocEntry]) -> list[Start]:
    by_member = {doc.member: doc for doc in docs}
    positioned: list[tuple[int, int, Start]] = []
    for order, entry in enumerate(toc):
        doc = by_member.get(entry.member)
        if doc is None:
            continue
        block = doc.text.anchors.get(entry.fragment, 0) if entry.fragment else 0
        positioned.append((doc.offset + block, order, Start(doc.offset + block, entry.path)))
    positioned.sort(key=lambda item: (item[0], item[1]))
    starts: list[Start] = []
    for at, _, start in positioned:
        if starts and starts[-1].at == at:
            # A parent and its first child point at the same place: the deeper entry names the chapter.
            if len(start.path) > len(starts[-1].path):
                starts[-1] = start
            continue
        starts.append(start)
    return starts


def _toc_usable(starts: list[Start], docs: list[_Doc]) -> bool:
    documents_with_text = sum(1 for doc in docs if doc.text.blocks and not doc.front_reason)
    return len(starts) >= 2 or (len(starts) == 1 and documents_with_text <= 1)


def _with_untitled_documents(docs: list[_Doc], starts: list[Start]) -> list[Start]:
    """Add a start for every document before the first TOC entry and every unlisted front-matter page."""
    starting_docs = {_doc_at(docs, start.at) for start in starts}
    extra: list[Start] = []
    first = starts[0].at
    for index, doc in enumerate(docs):
        if index in starting_docs or not doc.text.blocks:
            continue
        if doc.offset < first or doc.front_reason:
            extra.append(Start(doc.offset, (), implicit=True))
    return sorted(starts + extra, key=lambda start: start.at)


def _doc_at(docs: list[_Doc], at: int) -> int:
    for index in range(len(docs) - 1, -1, -1):
        if docs[index].offset <= at:
            return index
    return 0


def _spine_starts(docs: list[_Doc], blocks: list[Block]) -> list[Start]:
    """One chapter per document, or per heading when a document holds several chapters."""
    starts: list[Start] = []
    for doc in docs:
        if not doc.text.blocks:
            continue
        end = doc.offset + len(doc.text.blocks)
        inner, _ = heading_starts(blocks, doc.offset, end)
        if len(inner) >= 2:
            if inner[0].at > doc.offset:
                starts.append(Start(doc.offset, (), implicit=True))
            starts.extend(inner)
        else:
            starts.append(Start(doc.offset, (), implicit=True))
    return starts


def _keep_readable(
    found: list[Section], docs: list[_Doc], book_title: str, options: IngestOptions, reading: _Reading
) -> list[RawChapter]:
    chapters: list[RawChapter] = []
    left_out: list[str] = []
    for section in found:
        if not section.blocks:
            continue
        doc = docs[_doc_at(docs, section.lo)]
        title = section.title or _document_title(doc, book_title)
        reason = _front_reason(section, doc, title, book_title)
        if reason and not options.keep_front_matter:
            left_out.append(title or reason)
            continue
        chapters.append(RawChapter(title, [block.text for block in section.blocks]))
    if left_out:
        reading.warnings.append(
            "left out front and back matter: "
            + ", ".join(f"'{name}'" for name in left_out[:12])
            + (f" and {len(left_out) - 12} more" if len(left_out) > 12 else "")
            + " (IngestOptions(keep_front_matter=True) keeps them)"
        )
    return chapters


def _document_title(doc: _Doc, book_title: str) -> str:
    title = clean_title(doc.text.title)
    if not title or title_key(title) == title_key(book_title) or re.fullmatch(r"[\w.-]+\.x?html?", title):
        return ""
    return title


def _front_reason_of_document(doc: _Doc, front_members: dict[str, str]) -> str:
    if doc.member in front_members:
        return front_members[doc.member]
    matched = doc.text.semantics & _FRONT_MATTER_TYPES
    return min(matched) if matched else ""


def _front_reason(section: Section, doc: _Doc, title: str, book_title: str) -> str:
    """Why a section is front or back matter, or '' when it is to be read."""
    if section.lo == doc.offset and doc.front_reason and not _starts_real_chapter(section, doc):
        return doc.front_reason
    if is_front_matter_title(title):
        return "titled as front matter"
    text = " ".join(block.text for block in section.blocks)
    if len(text) < 2500 and len({match.lower() for match in _COPYRIGHT_SIGNS.findall(text)}) >= 2:
        return "copyright page"
    if (
        doc.text.link_chars >= 0.6 * max(doc.text.text_chars, 1)
        and len(doc.text.blocks) >= 3
        and section.lo == doc.offset
        and section.hi >= doc.offset + len(doc.text.blocks)
    ):
        return "contents page"
    if (
        len(text) < 400
        and section.blocks
        and title_key(section.blocks[0].text) == title_key(book_title)
        and len(section.blocks) <= 5
    ):
        return "title page"
    return ""


def _starts_real_chapter(section: Section, doc: _Doc) -> bool:
    # A TOC entry named like a chapter on a page typed as front matter: trust the TOC only for
    # pages whose type is not one of the unmistakable ones.
    return not section.start.implicit and doc.front_reason not in ("cover", "toc", "copyright-page", "index")


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__

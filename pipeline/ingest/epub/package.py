"""The package document (OPF): the manifest of the book's files, the spine that orders them for
reading, and the EPUB 2 guide that types some of them (cover, title page, contents, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.epub.members import DAMAGED_EPUB_FIX, parse_required_xml
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.safezip import SafeZip, resolve_href
from pipeline.ingest.xmlsafe import local_name


@dataclass(frozen=True)
class ManifestItem:
    id: str
    member: str  # archive path ('' when the href leaves the archive)
    media_type: str
    properties: frozenset[str]
    href: str = ""  # as the manifest writes it


@dataclass
class Package:
    opf_member: str
    version: str
    metadata: etree._Element | None
    manifest: dict[str, ManifestItem]
    spine: list[tuple[ManifestItem, bool]]  # (item, linear)
    ncx_id: str
    guide: list[tuple[str, str]]  # (type, member#fragment)


def read_package(archive: SafeZip, path: Path, opf_member: str, reading: Reading) -> Package:
    """The package document at ``opf_member``.

    Raises:
        BookError: it is missing, damaged, not an OPF package, or its spine is empty.
    """
    root = parse_required_xml(archive, opf_member, path)
    if local_name(root) != "package":
        raise BookError(path, f"'{opf_member}' is not an OPF package document", DAMAGED_EPUB_FIX)
    sections = {local_name(child): child for child in root if local_name(child)}
    manifest = _manifest(sections.get("manifest"), opf_member, reading)
    spine_element = sections.get("spine")
    spine = _spine(spine_element, manifest)
    if not spine:
        raise _no_reading_order(path, opf_member, spine_element, manifest)
    return Package(
        opf_member=opf_member,
        version=root.get("version", ""),
        metadata=sections.get("metadata"),
        manifest=manifest,
        spine=spine,
        ncx_id=spine_element.get("toc", "") if spine_element is not None else "",
        guide=_guide(sections.get("guide"), opf_member),
    )


def _no_reading_order(
    path: Path, opf_member: str, spine: etree._Element | None, manifest: dict[str, ManifestItem]
) -> BookError:
    """The error for a spine that leads to nothing in the book, saying why: empty, pointing outside
    the book, or naming items the manifest does not have."""
    fix = "the EPUB is damaged or incomplete; re-export it with an EPUB editor such as Sigil or Calibre"
    itemrefs = [] if spine is None else [item for item in spine if local_name(item) == "itemref"]
    idrefs = [itemref.get("idref", "") for itemref in itemrefs]
    outside = [manifest[idref].href for idref in idrefs if idref in manifest and not manifest[idref].member]
    if outside:
        named = ", ".join(f"'{href[:80]}'" for href in outside[:3]) + (" ..." if len(outside) > 3 else "")
        return BookError(
            path,
            f"its reading order (the spine of '{opf_member}') only points outside the book ({named}), "
            "so the file holds nothing to read",
            "get a copy of the book with its chapters inside the EPUB file",
        )
    if idrefs:
        return BookError(
            path, f"the spine of '{opf_member}' names {len(idrefs)} item(s) the manifest does not list", fix
        )
    return BookError(path, f"the package document '{opf_member}' has an empty spine (no reading order)", fix)


def href_target(base_member: str, href: str) -> str:
    """'dir/file.xhtml#frag' for an href found in ``base_member``; '' when it leaves the archive."""
    href = href.strip()
    target, _, fragment = href.partition("#")
    if not target:
        return f"{base_member}#{fragment}" if fragment else ""
    member = resolve_href(base_member, unquote(target.partition("?")[0]))
    if member is None:
        return ""
    return f"{member}#{fragment}" if fragment else member


def _manifest(element: etree._Element | None, opf_member: str, reading: Reading) -> dict[str, ManifestItem]:
    items: dict[str, ManifestItem] = {}
    if element is None:
        return items
    for item in element:
        if local_name(item) != "item" or not item.get("id"):
            continue
        href = item.get("href", "")
        member = href_target(opf_member, href).partition("#")[0]
        if not member:
            reading.warn(f"manifest item '{href[:80]}' points outside the book; ignored")
        items[item.get("id", "")] = ManifestItem(
            item.get("id", ""),
            member,
            item.get("media-type", "").lower(),
            frozenset(item.get("properties", "").split()),
            href,
        )
    return items


def _spine(
    element: etree._Element | None, manifest: dict[str, ManifestItem]
) -> list[tuple[ManifestItem, bool]]:
    """The manifest items in reading order, each with whether it is linear (read in sequence)."""
    spine: list[tuple[ManifestItem, bool]] = []
    if element is None:
        return spine
    for itemref in element:
        item = manifest.get(itemref.get("idref", "")) if local_name(itemref) == "itemref" else None
        if item is not None and item.member:
            spine.append((item, itemref.get("linear", "yes").strip().lower() != "no"))
    return spine


def _guide(element: etree._Element | None, opf_member: str) -> list[tuple[str, str]]:
    guide: list[tuple[str, str]] = []
    if element is None:
        return guide
    for reference in element:
        member = href_target(opf_member, reference.get("href", ""))
        if member:
            guide.append((reference.get("type", "").lower(), member))
    return guide

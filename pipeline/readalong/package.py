"""The package document (OPF) of a read-along EPUB: its overlays, their audio and durations, and
the class that readers set on the sentence being read.

A book's own package is kept (its metadata, manifest, spine, guide) and only added to; an EPUB 2
package becomes an EPUB 3 one (media overlays exist only there): version 3.0, its navigation
document named, a ``dcterms:modified`` date, and the OPF 2 attributes of its metadata turned into
EPUB 3 refinements (``opf:role``, ``opf:file-as``) or left out where EPUB 3 has none.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from lxml import etree

from pipeline.ingest.epub.package import href_target
from pipeline.ingest.xmlsafe import local_name
from pipeline.readalong.overlays import clock

OPF = "http://www.idpf.org/2007/opf"
DC = "http://purl.org/dc/elements/1.1/"
ACTIVE_CLASS = "-epub-media-overlay-active"
_OVERLAY_PROPERTIES = (
    "media:duration",
    "media:active-class",
    "media:narrator",
    "media:playback-active-class",
)


@dataclass(frozen=True)
class Overlay:
    document: str  # the content document's path in the EPUB
    smil: str  # its overlay's path in the EPUB
    milliseconds: int  # the overlay's duration


@dataclass(frozen=True)
class Additions:
    """What a read-along edition adds to a package."""

    overlays: tuple[Overlay, ...]
    audio: tuple[str, ...]  # paths in the EPUB, AAC in MP4
    stylesheet: str  # path in the EPUB
    narrator: str = ""


def add_overlays(root: etree._Element, opf_member: str, additions: Additions) -> None:
    """Declare ``additions`` in the package ``root`` (the OPF at ``opf_member``)."""
    manifest, metadata = _section(root, "manifest"), _section(root, "metadata")
    _forget_old_overlays(manifest, metadata)
    taken = {item.get("id", "") for item in manifest}
    items = {href_target(opf_member, item.get("href", "")).partition("#")[0]: item for item in manifest}
    for number, audio in enumerate(additions.audio, start=1):
        _add_item(manifest, opf_member, taken, f"ra-audio-{number}", audio, "audio/mp4")
    _add_item(manifest, opf_member, taken, "ra-css", additions.stylesheet, "text/css")
    total = 0
    for number, overlay in enumerate(additions.overlays, start=1):
        smil_id = _add_item(
            manifest, opf_member, taken, f"ra-smil-{number}", overlay.smil, "application/smil+xml"
        )
        items[overlay.document].set("media-overlay", smil_id)
        _meta(metadata, "media:duration", clock(overlay.milliseconds), refines=f"#{smil_id}")
        total += overlay.milliseconds
    _meta(metadata, "media:duration", clock(total))
    _meta(metadata, "media:active-class", ACTIVE_CLASS)
    if additions.narrator:
        _meta(metadata, "media:narrator", additions.narrator)
    set_modified(metadata)
    _without_opf_prefix(root)


def _without_opf_prefix(root: etree._Element) -> None:
    """Declare the metadata without an ``opf:`` prefix for the package's own namespace, so that the
    elements added are written ``<meta>``, as the package's others are, not ``<opf:meta>``."""
    metadata = _section(root, "metadata")
    nsmap = {prefix: uri for prefix, uri in metadata.nsmap.items() if prefix is None or uri != OPF}
    if nsmap == metadata.nsmap:
        return
    fresh = etree.Element(metadata.tag, dict(metadata.attrib), nsmap=nsmap)
    fresh.text, fresh.tail = metadata.text, metadata.tail
    for child in list(metadata):
        fresh.append(child)
    metadata.getparent().replace(metadata, fresh)


def upgrade_to_epub3(root: etree._Element, opf_member: str, nav: str) -> None:
    """Make an EPUB 2 package an EPUB 3 one, whose navigation document is at ``nav``."""
    root.set("version", "3.0")
    metadata, manifest = _section(root, "metadata"), _section(root, "manifest")
    taken = {item.get("id", "") for item in manifest}
    _add_item(manifest, opf_member, taken, "ra-nav", nav, "application/xhtml+xml", properties="nav")
    dates = [element for element in metadata if local_name(element) == "date"]
    for extra in dates[1:]:  # EPUB 3 allows one publication date
        metadata.remove(extra)
    for number, element in enumerate(list(metadata)):
        _refine_opf2_attributes(metadata, element, number)
    cover = next(
        (m.get("content") for m in metadata if local_name(m) == "meta" and m.get("name") == "cover"), None
    )
    for item in manifest:
        if cover and item.get("id") == cover and item.get("media-type", "").startswith("image/"):
            item.set("properties", " ".join(filter(None, [item.get("properties"), "cover-image"])))


def set_modified(metadata: etree._Element) -> None:
    """``dcterms:modified``, as EPUB 3 requires, set to now."""
    for element in list(metadata):
        if local_name(element) == "meta" and element.get("property") == "dcterms:modified":
            metadata.remove(element)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    _meta(metadata, "dcterms:modified", now)


def relative(from_member: str, to_member: str) -> str:
    """``to_member`` as an href in ``from_member`` (both paths in the EPUB)."""
    return posixpath.relpath(to_member, posixpath.dirname(from_member) or ".")


def _refine_opf2_attributes(metadata: etree._Element, element: etree._Element, number: int) -> None:
    opf2 = {key: value for key, value in element.attrib.items() if key.startswith(f"{{{OPF}}}")}
    if not opf2:
        return
    for key in opf2:
        del element.attrib[key]
    refinements = [
        (prop, opf2.get(f"{{{OPF}}}{key}", "").strip(), scheme)
        for key, prop, scheme in (("role", "role", "marc:relators"), ("file-as", "file-as", ""))
    ]
    refinements = [
        item for item in refinements if item[1] and local_name(element) in ("creator", "contributor")
    ]
    if not refinements:
        return
    if not element.get("id"):
        element.set("id", f"ra-meta-{number}")
    for prop, value, scheme in refinements:
        meta = _meta(metadata, prop, value, refines=f"#{element.get('id')}")
        if scheme:
            meta.set("scheme", scheme)


def _forget_old_overlays(manifest: etree._Element, metadata: etree._Element) -> None:
    """A book read along before: its overlays are replaced by the new ones."""
    for item in manifest:
        item.attrib.pop("media-overlay", None)
    for element in list(metadata):
        if local_name(element) == "meta" and element.get("property") in _OVERLAY_PROPERTIES:
            metadata.remove(element)


def _section(root: etree._Element, name: str) -> etree._Element:
    found = next((child for child in root if local_name(child) == name), None)
    if found is None:
        found = etree.SubElement(root, f"{{{OPF}}}{name}")
    return found


def _add_item(
    manifest: etree._Element,
    opf_member: str,
    taken: set[str],
    wanted: str,
    member: str,
    media_type: str,
    properties: str = "",
) -> str:
    item_id, suffix = wanted, 1
    while item_id in taken:
        suffix += 1
        item_id = f"{wanted}-{suffix}"
    taken.add(item_id)
    item = etree.SubElement(
        manifest,
        f"{{{OPF}}}item",
        {"id": item_id, "href": relative(opf_member, member), "media-type": media_type},
    )
    if properties:
        item.set("properties", properties)
    return item_id


def _meta(metadata: etree._Element, prop: str, value: str, refines: str = "") -> etree._Element:
    meta = etree.SubElement(metadata, f"{{{OPF}}}meta", {"property": prop})
    if refines:
        meta.set("refines", refines)
    meta.text = value
    return meta


def new_package(
    identifier: str, title: str, language: str, fields: Sequence[tuple[str, str]]
) -> etree._Element:
    """An EPUB 3 package with its required metadata and ``fields`` (Dublin Core name, value), and an
    empty manifest and spine."""
    root = etree.Element(
        f"{{{OPF}}}package", {"version": "3.0", "unique-identifier": "book-id"}, nsmap={None: OPF}
    )
    metadata = etree.SubElement(root, f"{{{OPF}}}metadata", nsmap={"dc": DC})
    etree.SubElement(metadata, f"{{{DC}}}identifier", {"id": "book-id"}).text = identifier
    etree.SubElement(metadata, f"{{{DC}}}title").text = title
    etree.SubElement(metadata, f"{{{DC}}}language").text = language
    for name, value in fields:
        etree.SubElement(metadata, f"{{{DC}}}{name}").text = value
    etree.SubElement(root, f"{{{OPF}}}manifest")
    etree.SubElement(root, f"{{{OPF}}}spine")
    set_modified(metadata)
    return root

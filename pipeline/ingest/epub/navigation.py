"""The table of contents: where chapters begin and what they are called, from the EPUB 3
navigation document, else the EPUB 2 NCX; and which documents the guide and landmarks type as
front matter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lxml import etree

from pipeline.ingest.epub.front_matter import FRONT_MATTER_TYPES
from pipeline.ingest.epub.members import MAX_METADATA_XML_BYTES, element_text, parse_optional_xhtml
from pipeline.ingest.epub.package import Package, href_target
from pipeline.ingest.epub.reading import Reading, first_line
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import EPUB_TYPE
from pipeline.ingest.xmlsafe import local_name

_MAX_ENTRIES = 100_000  # nesting stops being followed past this many entries (a hostile TOC)
FrontMembers = dict[str, str]  # archive member -> its front-matter type
_Item = tuple[str, str, etree._Element | None]  # an entry's label, its href, what holds its children


@dataclass(frozen=True)
class TocEntry:
    path: tuple[str, ...]  # this entry's title, prefixed by its ancestors'
    member: str
    fragment: str


def read_table_of_contents(
    archive: SafeZip, package: Package, reading: Reading
) -> tuple[list[TocEntry], FrontMembers]:
    """The table of contents and the front-matter members; none of either, with a warning, when
    the navigation document holds text that cannot be decoded (chapters then follow the spine)."""
    try:
        return _table_of_contents(archive, package, reading)
    except ValueError as exc:  # undecodable text left in a recovered navigation document
        reading.warn(f"the table of contents is unreadable ({first_line(exc)}); chapters follow the spine")
        return [], {}


def _table_of_contents(
    archive: SafeZip, package: Package, reading: Reading
) -> tuple[list[TocEntry], FrontMembers]:
    """Entries from the EPUB 3 nav document, else the NCX; and members that are front matter."""
    front = {
        member: kind for kind, member in package.guide if kind in FRONT_MATTER_TYPES or kind == "title-page"
    }
    entries: list[TocEntry] = []
    nav = next((item for item in package.manifest.values() if "nav" in item.properties and item.member), None)
    if nav is not None and archive.has(nav.member):
        root = _parse_navigation(archive, nav.member, reading)
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
            root = _parse_navigation(archive, ncx.member, reading)
            if root is not None:
                entries = _ncx_entries(root, ncx.member)
    return entries, front


def _parse_navigation(archive: SafeZip, member: str, reading: Reading) -> etree._Element | None:
    return parse_optional_xhtml(
        archive,
        member,
        reading,
        unreadable="table of contents '{member}' is unreadable ({problem}); using the spine",
        malformed="table of contents '{member}' is malformed ({problem}); recovered what could be read",
        max_bytes=MAX_METADATA_XML_BYTES,
    )


# --- EPUB 3 navigation document ------------------------------------------------------------------


def _nav_entries(root: etree._Element, nav_member: str) -> tuple[list[TocEntry], FrontMembers]:
    """The entries of the ``toc`` nav (else of the first nav that is no landmarks or page list),
    and the front matter its landmarks nav names."""
    navs = [element for element in root.iter() if local_name(element) == "nav"]
    typed = {
        id(nav): set((nav.get(EPUB_TYPE, "") + " " + nav.get("role", "")).lower().split()) for nav in navs
    }
    landmarks: FrontMembers = {}
    for nav in navs:
        if typed[id(nav)] & {"landmarks", "doc-landmarks"}:
            landmarks.update(_front_matter_landmarks(nav, nav_member))
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
                _add_entries(child, (), nav_member, entries, _nav_item)
    return entries, landmarks


def _front_matter_landmarks(nav: etree._Element, nav_member: str) -> FrontMembers:
    landmarks: FrontMembers = {}
    for link in nav.iter():
        kind = (link.get(EPUB_TYPE, "") or "").lower()
        member = href_target(nav_member, link.get("href", "")) if local_name(link) == "a" else ""
        if member and set(kind.split()) & FRONT_MATTER_TYPES:
            landmarks[member] = kind
    return landmarks


def _nav_item(item: etree._Element) -> _Item | None:
    """An ``<li>``: its first link or span labels it, a nested list holds its children."""
    if local_name(item) != "li":
        return None
    label, href, children = "", "", None
    for child in item:
        name = local_name(child)
        if name in ("a", "span") and not label:
            label = element_text(child)
            href = child.get("href", "") if name == "a" else ""
        elif name in ("ol", "ul"):
            children = child
    return label, href, children


# --- EPUB 2 NCX ----------------------------------------------------------------------------------


def _ncx_entries(root: etree._Element, ncx_member: str) -> list[TocEntry]:
    entries: list[TocEntry] = []
    nav_map = next((element for element in root.iter() if local_name(element) == "navmap"), None)
    if nav_map is not None:
        _add_entries(nav_map, (), ncx_member, entries, _ncx_point)
    return entries


def _ncx_point(point: etree._Element) -> _Item | None:
    """A ``<navPoint>``: labelled by its ``navLabel``, its children nested in it directly."""
    if local_name(point) != "navpoint":
        return None
    label, src = "", ""
    for child in point:
        name = local_name(child)
        if name == "navlabel" and not label:
            label = element_text(child)
        elif name == "content":
            src = child.get("src", "")
    return label, src, point


# --- nav and NCX alike ---------------------------------------------------------------------------


def _add_entries(
    parent: etree._Element,
    parents: tuple[str, ...],
    base_member: str,
    entries: list[TocEntry],
    read_item: Callable[[etree._Element], _Item | None],
) -> None:
    """The entries among ``parent``'s children (``read_item`` reads one, None for a non-entry),
    each followed by its own children, depth first."""
    for child in parent:
        item = read_item(child)
        if item is None:
            continue
        label, href, children = item
        path = parents + (label,)
        _add_entry(entries, path, base_member, href)
        if children is not None and len(entries) < _MAX_ENTRIES:
            _add_entries(children, path, base_member, entries, read_item)


def _add_entry(entries: list[TocEntry], path: tuple[str, ...], base_member: str, href: str) -> None:
    """Add the entry ``href`` points to (from ``base_member``), unless it points nowhere in the book."""
    target = href_target(base_member, href) if href else ""
    if target:
        member, _, fragment = target.partition("#")
        entries.append(TocEntry(path, member, fragment))

"""The book's metadata from the package document: title, authors, language, publisher, date,
description, cover, subtitle, series (EPUB 3 ``belongs-to-collection`` with its ``group-position``,
else calibre's ``calibre:series``/``series_index``), ISBN and subjects, EPUB 3 refinements
(``<meta refines>``) honoured."""

from __future__ import annotations

import re
from pathlib import Path

from lxml import etree

from pipeline.ingest.epub.cover import read_cover
from pipeline.ingest.epub.members import element_text
from pipeline.ingest.epub.package import Package
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.identifiers import isbn_in, series_position
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xmlsafe import local_name
from pipeline.types import BookMetadata

_OPF_NS = "{http://www.idpf.org/2007/opf}"
Refinements = dict[str, dict[str, str]]  # element id -> property -> value


def read_metadata(archive: SafeZip, package: Package, path: Path, reading: Reading) -> BookMetadata:
    """The book's metadata; its file name stands in for a missing title."""
    fields: dict[str, list[etree._Element]] = {}
    refines: Refinements = {}
    named: dict[str, str] = {}  # EPUB 2 <meta name content>: cover (a manifest id), calibre:series...
    collections: list[tuple[str, str]] = []  # EPUB 3 belongs-to-collection: (id, name)
    if package.metadata is not None:
        for element in package.metadata.iter():
            name = local_name(element)
            if name == "meta":
                if element.get("refines") and element.get("property"):
                    refined = refines.setdefault(element.get("refines", "").lstrip("#"), {})
                    refined[element.get("property", "")] = (element.text or "").strip()
                elif element.get("property") == "belongs-to-collection" and (element.text or "").strip():
                    collections.append((element.get("id", ""), " ".join(element.text.split())))
                elif element.get("name"):
                    named.setdefault(element.get("name", ""), element.get("content", "").strip())
            elif name:
                fields.setdefault(name, []).append(element)
    titles = fields.get("title", [])
    title = _main_title(titles, refines) or path.stem
    cover, cover_mime = read_cover(archive, package, named.get("cover", ""), reading)
    series, series_index = _series(collections, refines, named)
    return BookMetadata(
        title=title,
        authors=_authors(fields.get("creator", []), refines),
        language=_first_text(fields.get("language", [])),
        publisher=_first_text(fields.get("publisher", [])),
        date=_first_text(fields.get("date", [])),
        description=_plain_description(_first_text(fields.get("description", []))),
        cover=cover,
        cover_mime=cover_mime,
        subtitle=_subtitle(titles, refines, title),
        series=series,
        series_index=series_index,
        isbn=_isbn(fields.get("identifier", [])),
        subjects=_subjects(fields.get("subject", [])),
    )


def _subtitle(titles: list[etree._Element], refines: Refinements, main: str) -> str:
    for element in titles:
        if refines.get(element.get("id", ""), {}).get("title-type") == "subtitle" and element_text(element) != main:
            return element_text(element)
    return ""


def _series(collections: list[tuple[str, str]], refines: Refinements, named: dict[str, str]) -> tuple[str, str]:
    """The series (EPUB 3 collection of type 'series', else an untyped one, else calibre's) and the
    book's position in it."""
    typed = [(ident, name) for ident, name in collections
             if refines.get(ident, {}).get("collection-type", "series") == "series"]
    if typed:
        ident, name = typed[0]
        return name, series_position(refines.get(ident, {}).get("group-position", ""))
    if named.get("calibre:series"):
        return named["calibre:series"], series_position(named.get("calibre:series_index", ""))
    return "", ""


def _isbn(identifiers: list[etree._Element]) -> str:
    for element in identifiers:
        scheme = " ".join(value for key, value in element.attrib.items() if local_name_of(key) == "scheme")
        if found := isbn_in(element_text(element), "isbn" in scheme.lower()):
            return found
    return ""


def local_name_of(key: str) -> str:
    return key.rsplit("}", 1)[-1]


def _subjects(elements: list[etree._Element]) -> tuple[str, ...]:
    subjects: list[str] = []
    for element in elements:
        text = element_text(element)
        if text and text not in subjects:
            subjects.append(text)
    return tuple(subjects)


def _first_text(elements: list[etree._Element]) -> str:
    for element in elements:
        if text := element_text(element):
            return text
    return ""


def _main_title(titles: list[etree._Element], refines: Refinements) -> str:
    for element in titles:
        if refines.get(element.get("id", ""), {}).get("title-type") == "main" and element_text(element):
            return element_text(element)
    return _first_text(titles)


def _authors(creators: list[etree._Element], refines: Refinements) -> tuple[str, ...]:
    """The creators in the author role, or every creator when none has a role."""
    named = [(element, _creator_role(element, refines)) for element in creators if element_text(element)]
    if any(role for _, role in named):
        named = [(element, role) for element, role in named if role in ("", "aut")]
    authors: list[str] = []
    for element, _ in named:
        if element_text(element) not in authors:
            authors.append(element_text(element))
    return tuple(authors)


def _creator_role(element: etree._Element, refines: Refinements) -> str:
    role = element.get(f"{_OPF_NS}role") or element.get("role") or ""
    return (role or refines.get(element.get("id", ""), {}).get("role", "")).strip().lower()


def _plain_description(text: str) -> str:
    if "<" not in text:
        return text
    return " ".join(re.sub(r"<[^>]{0,2000}>", " ", text).split())

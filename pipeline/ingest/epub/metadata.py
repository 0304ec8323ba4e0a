"""The book's metadata from the package document: title, authors, language, publisher, date,
description and cover, EPUB 3 refinements (``<meta refines>``) honoured."""

from __future__ import annotations

import re
from pathlib import Path

from lxml import etree

from pipeline.ingest.epub.cover import read_cover
from pipeline.ingest.epub.members import element_text
from pipeline.ingest.epub.package import Package
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xmlsafe import local_name
from pipeline.types import BookMetadata

_OPF_NS = "{http://www.idpf.org/2007/opf}"
Refinements = dict[str, dict[str, str]]  # element id -> property -> value


def read_metadata(archive: SafeZip, package: Package, path: Path, reading: Reading) -> BookMetadata:
    """The book's metadata; its file name stands in for a missing title."""
    fields: dict[str, list[etree._Element]] = {}
    refines: Refinements = {}
    legacy_cover = ""  # EPUB 2: <meta name="cover" content="manifest id">
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
    cover, cover_mime = read_cover(archive, package, legacy_cover, reading)
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

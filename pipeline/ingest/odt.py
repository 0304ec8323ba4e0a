"""OpenDocument text (.odt): paragraphs in document order, chapters at its headings.

Read as the document shows with tracked changes accepted: the deleted text, which ODF keeps aside in
``<text:tracked-changes>``, is not read. Annotations (comments), hidden text, generated indexes and
tables of contents, frames and drawings are never read. Footnotes and endnotes (``<text:note>``,
written inline) are notes placed by ``--notes``; tables are read row by row, counted in a warning.
meta.xml gives the title, authors, language and date. A password-protected file is refused.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook
from pipeline.ingest.office import MAX_PART_XML_BYTES, book_from_blocks, dublin_core, open_archive, read_xml
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import Block, Note, NoteRef

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_SKIPPED = frozenset(
    "tracked-changes annotation annotation-end table-of-content alphabetical-index illustration-index "
    "table-index object-index user-index bibliography sequence-decls variable-decls user-field-decls "
    "forms frame hidden-text hidden-paragraph ruby-text note-citation bookmark-ref change change-start "
    "change-end soft-page-break table-columns table-column table-header-columns".split()
)
_MAX_LEVEL = 6


def read_odt(path: Path, options: IngestOptions) -> RawBook:
    """Read an OpenDocument text.

    Raises:
        BookError: not an ODT, password-protected, hostile, damaged, or over the caps.
    """
    with open_archive(path, options, "OpenDocument text") as archive:
        _refuse_encrypted(archive, path)
        content = read_xml(archive, "content.xml")
        if content is None:
            raise BookError(path, "is not an OpenDocument text (it has no 'content.xml')", "re-save it as .odt")
        titles = _title_styles(content, read_xml(archive, "styles.xml", max_bytes=MAX_PART_XML_BYTES))
        fields = dublin_core(read_xml(archive, "meta.xml", max_bytes=MAX_PART_XML_BYTES))
    reader = _BodyReader(titles)
    for body in content.iter(f"{_OFFICE}text"):
        reader.read(body)
    warnings = [f"{reader.tables} table(s) read row by row, each row's cells in order"] if reader.tables else []
    return book_from_blocks(path, "odt", reader.blocks, fields, (reader.notes, reader.refs), warnings)


def _refuse_encrypted(archive: SafeZip, path: Path) -> None:
    manifest = read_xml(archive, "META-INF/manifest.xml", max_bytes=MAX_PART_XML_BYTES)
    if manifest is not None and any(_name(element) == "encryption-data" for element in manifest.iter()):
        raise BookError(path, "is password-protected", "save a copy without a password and give that one")


def _title_styles(content: etree._Element, styles: etree._Element | None) -> frozenset[str]:
    """The paragraph styles that are, or derive from, the Title style."""
    parents: dict[str, str] = {}
    for root in (styles, content):
        for style in root.iter(f"{_STYLE}style") if root is not None else ():
            parents[style.get(f"{_STYLE}name", "")] = style.get(f"{_STYLE}parent-style-name", "")
    titles = set()
    for name in parents:
        seen, current = 0, name
        while current and seen < 20:
            if current.casefold() == "title":
                titles.add(name)
                break
            current, seen = parents.get(current, ""), seen + 1
    return frozenset(titles | {"Title"})


class _BodyReader:
    """Walks office:text in document order into blocks, notes and the references to them."""

    def __init__(self, titles: frozenset[str]) -> None:
        self.titles = titles
        self.blocks: list[Block] = []
        self.notes: list[Note] = []
        self.refs: list[NoteRef] = []
        self.tables = 0

    def read(self, element: etree._Element) -> None:
        for child in element:
            name = _name(child)
            if name in _SKIPPED:
                continue
            if name in ("p", "h"):
                self._paragraph(child, name)
            elif name == "table":
                self.tables += 1
                self._table(child)
            else:
                self.read(child)  # sections, lists and their items, table rows groups

    def _paragraph(self, paragraph: etree._Element, name: str) -> None:
        parts: list[str] = []
        self._inline(paragraph, parts)
        text = " ".join("".join(parts).split())
        if not text:
            return
        level = 0
        if name == "h":
            outline = paragraph.get(f"{_TEXT}outline-level", "1")
            level = min(int(outline) + 1 if outline.isdigit() else 2, _MAX_LEVEL)
        elif paragraph.get(f"{_TEXT}style-name", "") in self.titles:
            level = 1
        self.blocks.append(Block(text, level))

    def _table(self, table: etree._Element) -> None:
        for row in table.iter("{*}table-row"):
            cells = []
            for cell in row:
                parts: list[str] = []
                for paragraph in cell.iter(f"{_TEXT}p", f"{_TEXT}h"):
                    self._inline(paragraph, parts)
                    parts.append(" ")
                cells.append(" ".join("".join(parts).split()))
            text = ", ".join(cell for cell in cells if cell)
            if text:
                self.blocks.append(Block(text))

    def _inline(self, element: etree._Element, parts: list[str]) -> None:
        parts.append(element.text or "")
        for child in element:
            name = _name(child)
            if name == "s":
                count = child.get(f"{_TEXT}c", "1")
                parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
            elif name in ("tab", "line-break"):
                parts.append(" ")
            elif name == "note":
                self._note(child)
            elif name not in _SKIPPED:
                self._inline(child, parts)
            parts.append(child.tail or "")

    def _note(self, note: etree._Element) -> None:
        citation = next(note.iter(f"{_TEXT}note-citation"), None)
        label = " ".join("".join(citation.itertext()).split()) if citation is not None else ""
        target = f"#{note.get(f'{_TEXT}id') or f'note-{len(self.refs) + 1}'}"
        self.refs.append(NoteRef(target, label, len(self.blocks)))
        paragraphs = []
        for body in note.iter(f"{_TEXT}note-body"):
            for paragraph in body.iter(f"{_TEXT}p", f"{_TEXT}h"):
                parts: list[str] = []
                self._inline(paragraph, parts)
                if text := " ".join("".join(parts).split()):
                    paragraphs.append(text)
        if paragraphs:
            self.notes.append(Note((target,), label, paragraphs, len(self.blocks)))


def _name(element: etree._Element) -> str:
    tag = element.tag
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""

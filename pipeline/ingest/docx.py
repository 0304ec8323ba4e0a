"""Word documents (.docx): paragraphs in document order, chapters at the document's own headings.

Read as Word shows the document with every tracked change accepted: inserted text is read, deleted
and moved-away text is not. Comments are never read; field codes, hidden text and the fallback
copies of drawings neither. Footnotes and endnotes are notes, placed by ``--notes``; tables are read
row by row (each row one paragraph, its cells in order), counted in a warning. The core properties
give the title, authors, language and date. The ZIP and its XML are read under the EPUB's caps.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook
from pipeline.ingest.office import MAX_PART_XML_BYTES, book_from_blocks, dublin_core, open_archive, read_xml
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.safezip import SafeZip, resolve_href
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.ingest.xmlsafe import local_name

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OFFICE_DOCUMENT = "/officeDocument"
_SKIPPED = frozenset(
    "delText delInstrText instrText moveFrom del commentReference annotationRef footnoteRef endnoteRef "
    "rPr pPr sectPr tblPr trPr tcPr Fallback drawing pict object".split()
)
_SEPARATORS = frozenset(("separator", "continuationSeparator", "continuationNotice"))
_MAX_LEVEL = 6


def read_docx(path: Path, options: IngestOptions) -> RawBook:
    """Read a Word document.

    Raises:
        BookError: not a DOCX, password-protected, hostile, damaged, or over the caps.
    """
    with open_archive(path, options, "Word document") as archive:
        main = _main_part(archive)
        body = read_xml(archive, main)
        if body is None:
            raise BookError(path, f"is not a Word document (it has no '{main}')", "re-save it as .docx")
        folder = posixpath.dirname(main)
        levels = _heading_levels(read_xml(archive, f"{folder}/styles.xml", max_bytes=MAX_PART_XML_BYTES))
        notes = {
            kind: _notes(read_xml(archive, f"{folder}/{kind}s.xml"), kind) for kind in ("footnote", "endnote")
        }
        fields = dublin_core(read_xml(archive, "docProps/core.xml", max_bytes=MAX_PART_XML_BYTES))
    reader = _BodyReader(levels, notes, _generated_list_paragraphs(body))
    reader.read(body)
    warnings = []
    if reader.contents:
        warnings.append("left out the generated table of contents (Word's, a list of the headings)")
    if reader.tables:
        warnings.append(f"{reader.tables} table(s) read row by row, each row's cells in order")
    return book_from_blocks(path, "docx", reader.blocks, fields, (reader.notes, reader.refs), warnings)


def _main_part(archive: SafeZip) -> str:
    """The main document's member, as the package's relationships name it."""
    rels = read_xml(archive, "_rels/.rels", max_bytes=MAX_PART_XML_BYTES)
    for relationship in rels.iter() if rels is not None else ():
        if local_name(relationship) == "relationship" and relationship.get("Type", "").endswith(_OFFICE_DOCUMENT):
            target = resolve_href("", relationship.get("Target", "").lstrip("/"))
            if target:
                return target
    return "word/document.xml"


def _heading_levels(styles: etree._Element | None) -> dict[str, int]:
    """Style id → heading level: the Title style 1, 'heading N' (or outline level N-1) N + 1."""
    levels: dict[str, int] = {}
    if styles is None:
        return levels
    for style in styles.iter(f"{_W}style"):
        style_id = style.get(f"{_W}styleId", "")
        name_element = style.find(f"{_W}name")
        name = (name_element.get(f"{_W}val", "") if name_element is not None else "").casefold()
        outline = style.find(f"{_W}pPr/{_W}outlineLvl")
        if name == "title":
            levels[style_id] = 1
        elif name.startswith("heading ") and name[8:].isdigit():
            levels[style_id] = min(int(name[8:]) + 1, _MAX_LEVEL)
        elif outline is not None and outline.get(f"{_W}val", "").isdigit() and int(outline.get(f"{_W}val")) < 9:
            levels[style_id] = min(int(outline.get(f"{_W}val")) + 2, _MAX_LEVEL)
    return levels


def _notes(root: etree._Element | None, kind: str) -> dict[str, list[str]]:
    """Note id → its paragraphs, for the footnotes or endnotes part."""
    found: dict[str, list[str]] = {}
    if root is None:
        return found
    for note in root.iter(f"{_W}{kind}"):
        if note.get(f"{_W}type") in _SEPARATORS:
            continue
        paragraphs = [text for paragraph in note.iter(f"{_W}p") if (text := _paragraph_text(paragraph, None))]
        if paragraphs:
            found[note.get(f"{_W}id", "")] = paragraphs
    return found


class _BodyReader:
    """Walks the body in document order into blocks, notes and the references to them."""

    def __init__(
        self, levels: dict[str, int], notes: dict[str, dict[str, list[str]]], generated: set[etree._Element]
    ) -> None:
        self.levels = levels
        self.generated = generated  # the paragraphs of generated contents and indexes
        self.sources = notes
        self.blocks: list[Block] = []
        self.notes: list[Note] = []
        self.refs: list[NoteRef] = []
        self.tables = 0
        self.contents = 1 if generated else 0  # generated tables of contents left out

    def read(self, element: etree._Element) -> None:
        for child in element:
            name = _name(child)
            if name == "p":
                self._paragraph(child)
            elif name == "tbl":
                self.tables += 1
                self._table(child)
            elif name == "sdt" and _is_table_of_contents(child):
                self.contents += 1
            elif name not in _SKIPPED:
                self.read(child)  # body, sdt, sdtContent, customXml, ins: containers of paragraphs

    def _paragraph(self, paragraph: etree._Element) -> None:
        if paragraph in self.generated:
            return
        text = _paragraph_text(paragraph, self._reference)
        if text:
            self.blocks.append(Block(text, self._level(paragraph)))

    def _table(self, table: etree._Element) -> None:
        for row in table.iter(f"{_W}tr"):
            cells = [_paragraph_text(cell, self._reference) for cell in row.iter(f"{_W}tc")]
            text = ", ".join(cell for cell in cells if cell)
            if text:
                self.blocks.append(Block(text))

    def _level(self, paragraph: etree._Element) -> int:
        style = paragraph.find(f"{_W}pPr/{_W}pStyle")
        outline = paragraph.find(f"{_W}pPr/{_W}outlineLvl")
        if outline is not None and outline.get(f"{_W}val", "").isdigit() and int(outline.get(f"{_W}val")) < 9:
            return min(int(outline.get(f"{_W}val")) + 2, _MAX_LEVEL)
        return self.levels.get(style.get(f"{_W}val", "") if style is not None else "", 0)

    def _reference(self, element: etree._Element) -> None:
        kind = "footnote" if _name(element) == "footnoteReference" else "endnote"
        note_id = element.get(f"{_W}id", "")
        target = f"#{kind}-{note_id}"
        label = str(sum(1 for ref in self.refs if ref.target.startswith(f"#{kind}-")) + 1)
        self.refs.append(NoteRef(target, label, len(self.blocks)))
        paragraphs = self.sources[kind].pop(note_id, None)
        if paragraphs:
            self.notes.append(Note((target,), label, paragraphs, len(self.blocks)))


def _generated_list_paragraphs(body: etree._Element) -> set[etree._Element]:
    """The paragraphs that show a TOC or INDEX field's result: a table of contents or an index that
    Word generates from the headings, which may run over many paragraphs."""
    found: set[etree._Element] = set()
    fields: list[list[str]] = []  # open complex fields: [instruction, 'result' once separated]
    for element in body.iter(f"{_W}fldChar", f"{_W}instrText", f"{_W}t"):
        name = _name(element)
        kind = element.get(f"{_W}fldCharType", "")
        if name == "fldChar" and kind == "begin":
            fields.append(["", ""])
        elif name == "instrText" and fields:
            fields[-1][0] += element.text or ""
        elif name == "fldChar" and kind == "separate" and fields:
            fields[-1][1] = "result"
        elif name == "fldChar" and kind == "end" and fields:
            fields.pop()
        elif name == "t" and any(state == "result" and instruction.split()[:1] in (["TOC"], ["INDEX"])
                                 for instruction, state in fields):
            paragraph = next((parent for parent in element.iterancestors(f"{_W}p")), None)
            if paragraph is not None:
                found.add(paragraph)
    return found


def _is_table_of_contents(sdt: etree._Element) -> bool:
    """A content control that holds Word's generated table of contents."""
    gallery = sdt.find(f"{_W}sdtPr/{_W}docPartObj/{_W}docPartGallery")
    return gallery is not None and gallery.get(f"{_W}val", "").casefold() == "table of contents"


def _paragraph_text(element: etree._Element, on_reference: object) -> str:
    """The text of a paragraph (or a table cell, a note) as Word shows it, changes accepted."""
    parts: list[str] = []
    _collect(element, parts, on_reference)
    return " ".join("".join(parts).split())


def _collect(element: etree._Element, parts: list[str], on_reference: object) -> None:
    for child in element:
        name = _name(child)
        if name in _SKIPPED or _hidden(child):
            continue
        if name == "t":
            parts.append(child.text or "")
        elif name in ("tab", "br", "cr"):
            parts.append(" ")
        elif name == "noBreakHyphen":
            parts.append("-")
        elif name in ("footnoteReference", "endnoteReference"):
            if callable(on_reference):
                on_reference(child)
        elif name == "p" and parts:
            parts.append(" ")
            _collect(child, parts, on_reference)
        else:
            _collect(child, parts, on_reference)


def _hidden(run: etree._Element) -> bool:
    """A run formatted as hidden text (w:vanish), which Word does not show."""
    if _name(run) != "r":
        return False
    vanish = run.find(f"{_W}rPr/{_W}vanish")
    return vanish is not None and vanish.get(f"{_W}val", "true") not in ("0", "false", "off")


def _name(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2]

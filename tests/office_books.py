"""DOCX and ODT fixture books, written in code (python-docx, odfpy) with what a manuscript holds:
a title, chapter headings, footnotes and endnotes, a table, tracked changes, a comment, hidden text."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import parse_xml

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W = f'xmlns:w="{W_NS}"'
COMMENT = "A REVIEWER COMMENT NEVER READ"
DELETED = "struck words never read"
INSERTED = "added words read aloud"
HIDDEN = "HIDDEN TEXT NEVER READ"
TABLE = [("Alpha", "Beta"), ("Gamma", "Delta")]


@dataclass
class OfficeChapter:
    title: str
    paragraphs: list[str]


def write_docx(path: Path, title: str, chapters: list[OfficeChapter], *, author: str = "Wanda Writer",
               footnote: str = "", endnote: str = "") -> Path:
    """A Word document: the title in the Title style, each chapter under a Heading 1; in the first
    chapter a footnote mark, tracked changes, a comment and hidden text, then a table; in the last an
    endnote mark."""
    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = author
    document.core_properties.language = "en"
    document.add_heading(title, 0)
    for number, chapter in enumerate(chapters):
        document.add_heading(chapter.title, 1)
        for paragraph in chapter.paragraphs:
            document.add_paragraph(paragraph)
        if number == 0:
            _manuscript_marks(document, footnote)
            table = document.add_table(rows=len(TABLE), cols=2)
            for row, cells in zip(table.rows, TABLE):
                for cell, text in zip(row.cells, cells):
                    cell.text = text
        if number == len(chapters) - 1 and endnote:
            _note_reference(document.paragraphs[-1], "endnote", 1)
    if footnote:
        _add_notes_part(document, "footnote", footnote)
    if endnote:
        _add_notes_part(document, "endnote", endnote)
    document.save(str(path))
    return path


def _manuscript_marks(document: docx.Document, footnote: str) -> None:
    paragraph = document.add_paragraph("Here the editor worked")
    if footnote:
        _note_reference(paragraph, "footnote", 1)
    paragraph._p.append(parse_xml(
        f'<w:ins {_W} w:id="91" w:author="Ed" w:date="2026-01-01T00:00:00Z"><w:r><w:t xml:space="preserve">'
        f' {INSERTED}</w:t></w:r></w:ins>'))
    paragraph._p.append(parse_xml(
        f'<w:del {_W} w:id="92" w:author="Ed" w:date="2026-01-01T00:00:00Z"><w:r><w:delText>'
        f' {DELETED}</w:delText></w:r></w:del>'))
    hidden = paragraph.add_run(f" {HIDDEN}")
    hidden.font.hidden = True
    commented = paragraph.add_run(" and stopped.")
    document.add_comment(commented, text=COMMENT, author="Reviewer")


def _note_reference(paragraph, kind: str, number: int) -> None:  # type: ignore[no-untyped-def]
    paragraph._p.append(parse_xml(
        f'<w:r {_W}><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
        f'<w:{kind}Reference w:id="{number}"/></w:r>'))


def _add_notes_part(document: docx.Document, kind: str, text: str) -> None:
    blob = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:{kind}s {_W}>'
        f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
        f'<w:{kind} w:id="1"><w:p><w:r><w:{kind}Ref/></w:r><w:r><w:t xml:space="preserve"> {text}</w:t></w:r>'
        f'</w:p></w:{kind}></w:{kind}s>'
    ).encode()
    content_type = f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}s+xml"
    part = Part(PackURI(f"/word/{kind}s.xml"), content_type, blob, document.part.package)
    relationship = RELATIONSHIP_TYPE.FOOTNOTES if kind == "footnote" else RELATIONSHIP_TYPE.ENDNOTES
    document.part.relate_to(part, relationship)


def with_member(path: Path, member: str, data: bytes, out: Path) -> Path:
    """A copy of the archive at ``path`` with ``member`` replaced by ``data`` (deflated)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename != member:
                target.writestr(info.filename, source.read(info.filename))
        target.writestr(member, data)
    out.write_bytes(buffer.getvalue())
    return out

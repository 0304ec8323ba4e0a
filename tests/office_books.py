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
CONTENTS_LINE = "Chapter One, page 1"
# Word's generated table of contents: a content control of the 'Table of Contents' gallery
CONTENTS_CONTROL = (
    f'<w:sdt {_W}><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/></w:docPartObj>'
    f'</w:sdtPr><w:sdtContent><w:p><w:r><w:t>{CONTENTS_LINE}</w:t></w:r></w:p></w:sdtContent></w:sdt>'
)


@dataclass
class OfficeChapter:
    title: str
    paragraphs: list[str]


def write_docx(path: Path, title: str, chapters: list[OfficeChapter], *, author: str = "Wanda Writer",
               footnote: str = "", endnote: str = "", manuscript: bool = True) -> Path:
    """A Word document: the title in the Title style, each chapter under a Heading 1; in the first
    chapter a footnote mark, tracked changes, a comment and hidden text, then a table; in the last an
    endnote mark. Without ``manuscript``, only the title, headings and paragraphs."""
    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = author
    document.core_properties.language = "en"
    document.add_heading(title, 0)
    if manuscript:
        document.element.body.append(parse_xml(CONTENTS_CONTROL))
    for number, chapter in enumerate(chapters):
        document.add_heading(chapter.title, 1)
        for paragraph in chapter.paragraphs:
            document.add_paragraph(paragraph)
        if number == 0 and manuscript:
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


def write_odt(path: Path, title: str, chapters: list[OfficeChapter], *, author: str = "Wanda Writer",
              footnote: str = "", endnote: str = "", manuscript: bool = True) -> Path:
    """An OpenDocument text of the same shape as ``write_docx``'s (odfpy)."""
    from odf import dc, office, style, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text=title))
    document.meta.addElement(dc.Creator(text=author))
    document.meta.addElement(dc.Language(text="en"))
    document.styles.addElement(style.Style(name="Title", family="paragraph"))
    changes = text.TrackedChanges()
    region = text.ChangedRegion(id="ct1", qattributes={("http://www.w3.org/XML/1998/namespace", "id"): "ct1"})
    deletion = text.Deletion()
    deletion.addElement(office.ChangeInfo())
    deletion.addElement(text.P(text=DELETED))
    region.addElement(deletion)
    changes.addElement(region)
    document.text.addElement(changes)
    document.text.addElement(text.P(stylename="Title", text=title))
    for number, chapter in enumerate(chapters):
        document.text.addElement(text.H(outlinelevel=1, text=chapter.title))
        for paragraph in chapter.paragraphs:
            document.text.addElement(text.P(text=paragraph))
        if number == 0 and manuscript:
            document.text.addElement(_odt_manuscript_paragraph(footnote))
            document.text.addElement(_odt_table())
        if number == len(chapters) - 1 and endnote:
            document.text.lastChild.addElement(_odt_note("edn1", "endnote", "i", endnote))
    document.save(str(path))
    return path


def _odt_manuscript_paragraph(footnote: str):  # type: ignore[no-untyped-def]
    from odf import dc, office, text

    paragraph = text.P(text="Here the editor worked")
    if footnote:
        paragraph.addElement(_odt_note("ftn1", "footnote", "1", footnote))
    paragraph.addElement(text.Change(changeid="ct1"))
    paragraph.addElement(text.Span(text=f" {INSERTED}"))
    paragraph.addElement(text.HiddenText(condition="ooow:1", stringvalue=HIDDEN, text=f" {HIDDEN}"))
    comment = office.Annotation()
    comment.addElement(dc.Creator(text="Reviewer"))
    comment.addElement(text.P(text=COMMENT))
    paragraph.addElement(comment)
    paragraph.addElement(text.Span(text=" and stopped."))
    return paragraph


def _odt_note(note_id: str, kind: str, mark: str, words: str):  # type: ignore[no-untyped-def]
    from odf import text

    note = text.Note(id=note_id, noteclass=kind)
    note.addElement(text.NoteCitation(text=mark))
    body = text.NoteBody()
    body.addElement(text.P(text=words))
    note.addElement(body)
    return note


def _odt_table():  # type: ignore[no-untyped-def]
    from odf import table, text

    grid = table.Table(name="Grid")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    for cells in TABLE:
        row = table.TableRow()
        for value in cells:
            cell = table.TableCell(valuetype="string")
            cell.addElement(text.P(text=value))
            row.addElement(cell)
        grid.addElement(row)
    return grid

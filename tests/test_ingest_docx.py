"""Word documents: chapters at their headings, read as shown with every change accepted, comments
and hidden text never read, notes placed by --notes, tables row by row; hostile files refused."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from tests.office_books import (
    COMMENT,
    CONTENTS_LINE,
    DELETED,
    HIDDEN,
    INSERTED,
    OfficeChapter,
    with_member,
    write_docx,
)
from tests.pdf_books import prose
from tests.test_ingest_pdf import words

CHAPTERS = [OfficeChapter("Chapter One", prose(11, 6)), OfficeChapter("Chapter Two", prose(12, 5))]


@pytest.fixture
def manuscript(tmp_path: Path) -> Path:
    return write_docx(tmp_path / "draft.docx", "The Word Book", CHAPTERS,
                      footnote="The footnote says this.", endnote="The endnote says that.")


def spoken(book) -> str:  # type: ignore[no-untyped-def]
    return " ".join(paragraph for chapter in book.chapters for paragraph in chapter.paragraphs)


def test_chapters_follow_the_headings_and_the_words_come_in_order(manuscript: Path) -> None:
    book = read_book(manuscript)

    assert [chapter.title for chapter in book.chapters] == ["Chapter One", "Chapter Two", "Notes"]
    assert book.format == "docx"
    for chapter, source in zip(book.chapters, CHAPTERS):
        assert [words([paragraph]) for paragraph in chapter.paragraphs[: len(source.paragraphs)]] == [
            words([paragraph]) for paragraph in source.paragraphs]
    assert (book.metadata.title, book.metadata.authors, book.metadata.language) == (
        "The Word Book", ("Wanda Writer",), "en")


def test_tracked_changes_read_as_accepted_and_comments_and_hidden_text_never(manuscript: Path) -> None:
    text = spoken(read_book(manuscript))

    assert f"Here the editor worked {INSERTED} and stopped." in text
    assert DELETED not in text and COMMENT not in text and HIDDEN not in text


def test_the_generated_table_of_contents_is_left_out_with_a_warning(manuscript: Path) -> None:
    book = read_book(manuscript)

    assert CONTENTS_LINE not in spoken(book)
    assert any("table of contents" in warning for warning in book.warnings)


def test_tables_are_read_row_by_row_with_a_warning(manuscript: Path) -> None:
    book = read_book(manuscript)

    assert book.chapters[0].paragraphs[-2:] == ("Alpha, Beta", "Gamma, Delta")
    assert any("table(s) read row by row" in warning for warning in book.warnings)


def test_footnotes_and_endnotes_are_notes(manuscript: Path) -> None:
    at_end = read_book(manuscript)
    in_chapter = read_book(manuscript, IngestOptions(notes="chapter"))

    assert at_end.chapters[-1].paragraphs == (
        "Chapter One", "Note 1. The footnote says this.", "Chapter Two", "Note 1. The endnote says that.")
    assert in_chapter.chapters[1].paragraphs[-1] == "Note 1. The endnote says that."
    assert not re.search(r"\bworked1\b|\d", spoken(read_book(manuscript, IngestOptions(notes="skip"))))


def test_a_decompression_bomb_in_the_document_is_refused(manuscript: Path, tmp_path: Path) -> None:
    bomb = with_member(manuscript, "word/document.xml", b" " * (64 * 1024 * 1024), tmp_path / "bomb.docx")

    with pytest.raises(BookError, match="zip bomb"):
        read_book(bomb)


def test_entity_declarations_are_refused(manuscript: Path, tmp_path: Path) -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
              b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
              b"<w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>")
    hostile = with_member(manuscript, "word/document.xml", laughs, tmp_path / "laughs.docx")

    with pytest.raises(BookError, match="hostile"):
        read_book(hostile)


@pytest.mark.parametrize("content, problem", [
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512, "password-protected"),
    (b"just some text", "not a Word document"),
])
def test_encrypted_or_foreign_files_are_one_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "book.docx"
    path.write_bytes(content)

    with pytest.raises(BookError, match=problem):
        read_book(path)


def test_an_archive_without_a_document_is_not_a_word_document(tmp_path: Path) -> None:
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "nothing here")

    with pytest.raises(BookError, match="not a Word document"):
        read_book(path)


def test_a_table_of_contents_field_over_several_paragraphs_is_left_out(tmp_path: Path) -> None:
    import docx
    from docx.oxml import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    # as converters (Calibre) write it: the field opens in the first entry's paragraph, ends in the last's
    document.element.body.append(parse_xml(
        f'<w:p {w}><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> TOC \\h </w:instrText></w:r>'
        f'<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>Chapter One</w:t></w:r></w:p>'))
    document.element.body.append(parse_xml(
        f'<w:p {w}><w:r><w:t>Chapter Two</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>'))
    for title in ("Chapter One", "Chapter Two"):
        document.add_heading(title, 1)
        document.add_paragraph(f"The text of {title}.")
    document.save(str(tmp_path / "converted.docx"))

    book = read_book(tmp_path / "converted.docx")

    assert [(chapter.title, chapter.paragraphs) for chapter in book.chapters] == [
        ("Chapter One", ("The text of Chapter One.",)), ("Chapter Two", ("The text of Chapter Two.",))]
    assert any("table of contents" in warning for warning in book.warnings)

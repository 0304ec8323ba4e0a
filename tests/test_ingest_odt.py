"""OpenDocument texts: chapters at their headings, read as shown with changes accepted, comments
and hidden text never read, notes placed by --notes, tables row by row; hostile files refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from tests.office_books import COMMENT, DELETED, HIDDEN, INSERTED, OfficeChapter, with_member, write_odt
from tests.pdf_books import prose
from tests.test_ingest_pdf import words

CHAPTERS = [OfficeChapter("Chapter One", prose(31, 6)), OfficeChapter("Chapter Two", prose(32, 5))]


@pytest.fixture
def manuscript(tmp_path: Path) -> Path:
    return write_odt(tmp_path / "draft.odt", "The Open Book", CHAPTERS,
                     footnote="The footnote says this.", endnote="The endnote says that.")


def test_chapters_follow_the_headings_and_the_words_come_in_order(manuscript: Path) -> None:
    book = read_book(manuscript)

    assert [chapter.title for chapter in book.chapters] == ["Chapter One", "Chapter Two", "Notes"]
    for chapter, source in zip(book.chapters, CHAPTERS):
        assert [words([paragraph]) for paragraph in chapter.paragraphs[: len(source.paragraphs)]] == [
            words([paragraph]) for paragraph in source.paragraphs]
    assert (book.metadata.title, book.metadata.authors, book.metadata.language) == (
        "The Open Book", ("Wanda Writer",), "en")


def test_changes_accepted_comments_and_hidden_text_never_read_tables_row_by_row(manuscript: Path) -> None:
    book = read_book(manuscript)
    text = " ".join(paragraph for chapter in book.chapters for paragraph in chapter.paragraphs)

    assert f"Here the editor worked {INSERTED} and stopped." in text
    assert DELETED not in text and COMMENT not in text and HIDDEN not in text
    assert book.chapters[0].paragraphs[-2:] == ("Alpha, Beta", "Gamma, Delta")
    assert any("table(s) read row by row" in warning for warning in book.warnings)


def test_footnotes_and_endnotes_are_notes(manuscript: Path) -> None:
    assert read_book(manuscript).chapters[-1].paragraphs == (
        "Chapter One", "Note 1. The footnote says this.", "Chapter Two", "Note i. The endnote says that.")
    assert read_book(manuscript, IngestOptions(notes="chapter")).chapters[0].paragraphs[-1] == (
        "Note 1. The footnote says this.")


def test_a_decompression_bomb_in_the_content_is_refused(manuscript: Path, tmp_path: Path) -> None:
    bomb = with_member(manuscript, "content.xml", b" " * (64 * 1024 * 1024), tmp_path / "bomb.odt")

    with pytest.raises(BookError, match="zip bomb"):
        read_book(bomb)


def test_entity_declarations_are_refused(manuscript: Path, tmp_path: Path) -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE o [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
              b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
              b"<office:body><office:text>&b;</office:text></office:body></office:document-content>")

    with pytest.raises(BookError, match="hostile"):
        read_book(with_member(manuscript, "content.xml", laughs, tmp_path / "laughs.odt"))


def test_a_password_protected_document_is_refused(manuscript: Path, tmp_path: Path) -> None:
    manifest = (b'<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
                b'<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
                b'<manifest:encryption-data manifest:checksum="x"/></manifest:file-entry></manifest:manifest>')

    with pytest.raises(BookError, match="password-protected"):
        read_book(with_member(manuscript, "META-INF/manifest.xml", manifest, tmp_path / "locked.odt"))

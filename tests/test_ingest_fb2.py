"""FictionBook: sections as chapters, epigraphs, poems and notes read as a reader shows them, the
description as tags and cover; the zipped form too; hostile files refused with one line."""

from __future__ import annotations

import base64
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from pipeline.errors import BookError
from pipeline.ingest import SUPPORTED_EXTENSIONS, IngestOptions, read_book
from tests.pdf_books import prose
from tests.test_ingest_pdf import words

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
PARTS = {"Part One": {"Chapter 1": prose(21, 3), "Chapter 2": prose(22, 2)}, "Part Two": {"Chapter 3": prose(23, 3)}}
POEM = ["Over the hills", "and far away"]


def fb2_document(parts: dict[str, dict[str, list[str]]] = PARTS) -> str:
    sections = []
    for part, chapters in parts.items():
        inner = []
        for number, (title, paragraphs) in enumerate(chapters.items()):
            body = "".join(f"<p>{escape(paragraph)}</p>" for paragraph in paragraphs)
            if number == 0:
                body = ('<epigraph><p>Words before the words.</p><text-author>Someone Wise</text-author></epigraph>'
                        + body + '<poem><stanza>' + "".join(f"<v>{verse}</v>" for verse in POEM) + '</stanza></poem>'
                        + '<p>A line with a note<a l:href="#n1" type="note">1</a> in it.</p>')
            inner.append(f"<section><title><p>{title}</p></title>{body}</section>")
        sections.append(f"<section><title><p>{part}</p></title>{''.join(inner)}</section>")
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0" xmlns:l="http://www.w3.org/1999/xlink">'
        '<description><title-info><genre>prose</genre><author><first-name>Fyodor</first-name>'
        '<last-name>Testovsky</last-name></author><book-title>The Fiction Book</book-title>'
        '<annotation><p>A book made for a test.</p></annotation><date>1866</date>'
        '<coverpage><image l:href="#cover.png"/></coverpage><lang>en</lang></title-info>'
        '<publish-info><publisher>Test Press</publisher></publish-info></description>'
        '<body><title><p>The Fiction Book</p></title>' + "".join(sections) + '</body>'
        '<body name="notes"><title><p>Notes</p></title><section id="n1"><title><p>1</p></title>'
        '<p>The note, read where --notes says.</p></section></body>'
        f'<binary id="cover.png" content-type="image/png">{base64.b64encode(PNG).decode()}</binary>'
        '</FictionBook>'
    )


def write_fb2(path: Path, text: str | None = None) -> Path:
    path.write_text(text or fb2_document(), encoding="utf-8")
    return path


def test_sections_are_chapters_with_their_parts_in_the_titles(tmp_path: Path) -> None:
    book = read_book(write_fb2(tmp_path / "book.fb2"))

    assert [chapter.title for chapter in book.chapters] == ["Chapter 1", "Chapter 2", "Chapter 3", "Notes"]
    assert [getattr(chapter, "announcement", "") for chapter in book.chapters[:3]] == [
        "Part One. Chapter 1", "", "Part Two. Chapter 3"]  # a part is announced with its first chapter
    first = book.chapters[0].paragraphs
    assert first[:2] == ("Words before the words.", "Someone Wise")
    assert "Over the hills\nand far away" in first
    assert "A line with a note in it." in first
    assert book.chapters[-1].paragraphs == ("Note 1. The note, read where --notes says.",)


def test_every_prose_word_is_read_once_in_order(tmp_path: Path) -> None:
    book = read_book(write_fb2(tmp_path / "book.fb2"), IngestOptions(notes="skip"))

    read = words([paragraph for chapter in book.chapters for paragraph in chapter.paragraphs])
    source = words([paragraph for chapters in PARTS.values() for paragraphs in chapters.values()
                    for paragraph in paragraphs])
    assert [word for word in read if word in set(source)] == source


def test_the_description_gives_the_tags_and_the_cover(tmp_path: Path) -> None:
    metadata = read_book(write_fb2(tmp_path / "book.fb2")).metadata

    assert (metadata.title, metadata.authors, metadata.language) == ("The Fiction Book", ("Fyodor Testovsky",), "en")
    assert (metadata.date, metadata.publisher, metadata.description) == ("1866", "Test Press", "A book made for a test.")
    assert (metadata.cover, metadata.cover_mime) == (PNG, "image/png")


def test_a_zipped_fictionbook_is_read_like_the_plain_one(tmp_path: Path) -> None:
    zipped = tmp_path / "book.fb2.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("book.fb2", fb2_document())

    assert ".fb2.zip" in SUPPORTED_EXTENSIONS
    assert read_book(zipped).chapters == read_book(write_fb2(tmp_path / "book.fb2")).chapters


def test_a_zip_bomb_is_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.fb2.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("book.fb2", b" " * (64 * 1024 * 1024))

    with pytest.raises(BookError, match="zip bomb"):
        read_book(bomb)


@pytest.mark.parametrize("text, problem", [
    ('<?xml version="1.0"?><!DOCTYPE f [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
     '<FictionBook><body><section><p>&b;</p></section></body></FictionBook>', "hostile"),
    ('<?xml version="1.0"?><html><body><p>Not a FictionBook</p></body></html>', "not a FictionBook"),
])
def test_hostile_or_foreign_xml_is_one_clear_error(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(BookError, match=problem):
        read_book(write_fb2(tmp_path / "book.fb2", text))


def test_untitled_sections_opened_by_a_bold_line_are_chapters_named_by_it(tmp_path: Path) -> None:
    sections = "".join(f"<section><p><strong>{title}</strong></p><p>{title} text.</p></section>"
                       for title in ("First Part", "Second Part"))
    text = ('<?xml version="1.0"?><FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0">'
            "<description><title-info><book-title>Converted</book-title></title-info></description>"
            f"<body>{sections}</body></FictionBook>")  # as Calibre writes an FB2

    book = read_book(write_fb2(tmp_path / "converted.fb2", text))

    assert [(chapter.title, chapter.paragraphs) for chapter in book.chapters] == [
        ("First Part", ("First Part text.",)), ("Second Part", ("Second Part text.",))]

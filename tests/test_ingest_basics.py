"""read_book on ordinary books of every format: chapters, titles, paragraphs, metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
from books import write_epub, write_html, write_markdown, write_txt

from pipeline.errors import BookError
from pipeline.ingest import SUPPORTED_EXTENSIONS, IngestOptions, read_book

CHAPTERS = [
    ("The Beginning", ["It was a dark and stormy night.", "Mr. Smith said hello."]),
    ("The Middle", ["Nothing happened.", "Then something did."]),
    ("第三章 结局", ["他说：“你好。”然后走了。"]),
]
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def test_supported_extensions_are_the_documented_ones():
    assert SUPPORTED_EXTENSIONS == {".epub", ".txt", ".md", ".markdown", ".html", ".htm", ".xhtml", ".pdf", ".docx",
                                   ".fb2", ".fb2.zip", ".odt", ".mobi", ".azw3", ".azw"}


@pytest.mark.parametrize("version", [2, 3])
def test_epub_chapters_come_in_spine_order_with_toc_titles(tmp_path: Path, version: int):
    book = read_book(write_epub(tmp_path / "b.epub", "My Book", CHAPTERS, version=version))
    assert book.format == "epub"
    assert [chapter.title for chapter in book.chapters] == [title for title, _ in CHAPTERS]
    assert [list(chapter.paragraphs) for chapter in book.chapters] == [
        paragraphs for _, paragraphs in CHAPTERS
    ]
    assert [chapter.index for chapter in book.chapters] == [0, 1, 2]


@pytest.mark.parametrize("version", [2, 3])
def test_epub_metadata_and_cover(tmp_path: Path, version: int):
    book = read_book(
        write_epub(
            tmp_path / "b.epub",
            "My Book",
            CHAPTERS,
            author="Ann Writer",
            language="en-GB",
            cover=PNG,
            version=version,
        )
    )
    assert book.metadata.title == "My Book"
    assert book.metadata.authors == ("Ann Writer",)
    assert book.metadata.language == "en-GB"
    assert book.metadata.cover == PNG
    assert book.metadata.cover_mime == "image/png"
    assert book.chapters[0].title == "The Beginning"  # the cover page is not a chapter


def test_txt_chapters_from_chapter_headings(tmp_path: Path):
    book = read_book(write_txt(tmp_path / "b.txt", "My Book", CHAPTERS))
    assert book.format == "txt"
    assert book.metadata.title == "My Book"
    assert [chapter.title for chapter in book.chapters] == [
        "Chapter 1: The Beginning",
        "Chapter 2: The Middle",
        "Chapter 3: 第三章 结局",
    ]
    assert [list(chapter.paragraphs) for chapter in book.chapters] == [
        paragraphs for _, paragraphs in CHAPTERS
    ]


def test_markdown_chapters_from_second_level_headings_under_a_title(tmp_path: Path):
    book = read_book(write_markdown(tmp_path / "b.md", "My Book", CHAPTERS))
    assert book.metadata.title == "My Book"
    assert [chapter.title for chapter in book.chapters] == [title for title, _ in CHAPTERS]
    assert [list(chapter.paragraphs) for chapter in book.chapters] == [
        paragraphs for _, paragraphs in CHAPTERS
    ]


@pytest.mark.parametrize("name", ["b.html", "b.htm"])
def test_html_chapters_from_headings(tmp_path: Path, name: str):
    book = read_book(write_html(tmp_path / name, "My Book", CHAPTERS))
    assert book.format == "html"
    assert book.metadata.title == "My Book"
    assert [chapter.title for chapter in book.chapters] == [title for title, _ in CHAPTERS]
    assert [list(chapter.paragraphs) for chapter in book.chapters] == [
        paragraphs for _, paragraphs in CHAPTERS
    ]


def test_empty_chapters_are_dropped(tmp_path: Path):
    book = read_book(
        write_epub(tmp_path / "b.epub", "T", [("Empty", []), ("Blank", ["   "]), ("Real", ["Text."])])
    )
    assert [(chapter.index, chapter.title) for chapter in book.chapters] == [(0, "Real")]


@pytest.mark.parametrize("writer", [write_epub, write_txt, write_markdown, write_html])
def test_a_book_without_text_is_a_book_error(tmp_path: Path, writer):
    suffix = {write_epub: ".epub", write_txt: ".txt", write_markdown: ".md", write_html: ".html"}[writer]
    path = writer(tmp_path / f"empty{suffix}", "", [("", [])])
    with pytest.raises(BookError, match="no readable text"):
        read_book(path)


def test_missing_file_and_unsupported_type_are_book_errors(tmp_path: Path):
    with pytest.raises(BookError, match="file not found"):
        read_book(tmp_path / "nope.epub")
    rtf = tmp_path / "book.rtf"
    rtf.write_bytes(b"{\\rtf1 Hello}")
    with pytest.raises(BookError, match=r"unsupported file type '\.rtf'") as raised:
        read_book(rtf)
    assert str(rtf) in str(raised.value)


def test_options_are_frozen():
    with pytest.raises(AttributeError):
        IngestOptions().keep_front_matter = True  # type: ignore[misc]


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_entries"):
        IngestOptions(max_entries=0)

"""TXT, Markdown and HTML books: encodings, headings, paragraphs, metadata."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from books import write_txt

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book

ZH_NOVEL = "第一章 开始\n\n　　他走进房间。\n\n　　她笑了。\n\n第二章 结束\n\n　　故事结束了。\n"


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def outline(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    return [(chapter.title, chapter.paragraphs) for chapter in read_book(path).chapters]


# --- encodings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "encoding,bom",
    [
        ("utf-8", b""),
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("gb18030", b""),
        ("gbk", b""),
        ("utf-16-le", b""),
    ],
)
def test_text_encodings_are_detected(tmp_path: Path, encoding: str, bom: bytes):
    path = write(tmp_path, "zh.txt", bom + ZH_NOVEL.encode(encoding))
    assert outline(path) == [
        ("第一章 开始", ("他走进房间。", "她笑了。")),
        ("第二章 结束", ("故事结束了。",)),
    ]


def test_western_legacy_encoding_is_not_mistaken_for_chinese(tmp_path: Path):
    text = "Chapter 1\n\n\u201cCaf\u00e9,\u201d she said \u2014 na\u00efvely.\n"
    path = write(tmp_path, "w.txt", text.encode("cp1252"))
    assert outline(path) == [("Chapter 1", ("\u201cCaf\u00e9,\u201d she said \u2014 na\u00efvely.",))]


# --- headings and paragraphs ------------------------------------------------------------------------


def test_english_heading_styles(tmp_path: Path):
    text = (
        "CHAPTER I.\n\nIt began.\n\nCHAPTER II. The Second\n\nIt went on.\n\n"
        "Chapter Three\n\nAnd on.\n\nChapter 4: Four\n\nThe end.\n"
    )
    assert outline(write(tmp_path, "b.txt", text)) == [
        ("CHAPTER I.", ("It began.",)),
        ("CHAPTER II. The Second", ("It went on.",)),
        ("Chapter Three", ("And on.",)),
        ("Chapter 4: Four", ("The end.",)),
    ]


def test_parts_are_announced_before_their_first_chapter(tmp_path: Path):
    text = "PART ONE\n\nChapter 1\n\nA.\n\nChapter 2\n\nB.\n\nPART TWO\n\nChapter 1\n\nC.\n"
    book = read_book(write(tmp_path, "b.txt", text))
    # the player shows each chapter's own title, with its part only where two would look the same
    assert [chapter.title for chapter in book.chapters] == [
        "PART ONE — Chapter 1",
        "Chapter 2",
        "PART TWO — Chapter 1",
    ]
    assert [getattr(chapter, "announcement", "") for chapter in book.chapters] == [
        "PART ONE. Chapter 1",
        "",
        "PART TWO. Chapter 1",
    ]


def test_chinese_volumes_and_chapters(tmp_path: Path):
    text = "第一卷 风起\n\n第1章 初见\n\n正文一。\n\n第2章 再见\n\n正文二。\n\n番外 后来\n\n番外正文。\n"
    book = read_book(write(tmp_path, "b.txt", text))
    assert [(chapter.title, chapter.paragraphs) for chapter in book.chapters] == [
        ("第1章 初见", ("正文一。",)),
        ("第2章 再见", ("正文二。",)),
        ("番外 后来", ("番外正文。",)),
    ]
    assert getattr(book.chapters[0], "announcement", "") == "第一卷 风起。第1章 初见"


def test_bare_roman_numerals_are_headings_only_when_the_book_uses_them(tmp_path: Path):
    text = "I.\n\nFirst part text.\n\nII.\n\nSecond part text.\n"
    assert [title for title, _ in outline(write(tmp_path, "b.txt", text))] == ["I.", "II."]
    single = "I.\n\nJust one numbered line, so it is text.\n"
    assert outline(write(tmp_path, "c.txt", single)) == [
        ("c", ("I.", "Just one numbered line, so it is text."))
    ]


def test_a_book_without_headings_is_one_chapter_named_after_the_file(tmp_path: Path):
    text = "First paragraph\nwrapped over two lines.\n\nSecond paragraph.\n"
    assert outline(write(tmp_path, "my_story.txt", text)) == [
        ("my_story", ("First paragraph wrapped over two lines.", "Second paragraph."))
    ]


def test_one_paragraph_per_line_when_the_text_has_no_blank_lines(tmp_path: Path):
    text = "第一章 开始\n　　第一段。\n　　第二段。\n第二章 继续\n　　第三段。\n"
    assert outline(write(tmp_path, "b.txt", text)) == [
        ("第一章 开始", ("第一段。", "第二段。")),
        ("第二章 继续", ("第三段。",)),
    ]


def test_a_sentence_mentioning_a_chapter_inside_a_paragraph_is_not_a_heading(tmp_path: Path):
    text = "Chapter 1\n\nShe turned to the page that said\nChapter 5 of the report was missing.\n"
    assert outline(write(tmp_path, "b.txt", text)) == [
        ("Chapter 1", ("She turned to the page that said Chapter 5 of the report was missing.",))
    ]


def test_gutenberg_header_and_licence_are_left_out(tmp_path: Path):
    text = (
        "The Project Gutenberg eBook of Tiny Tales\n\nTitle: Tiny Tales\n\nAuthor: Ann Writer\n\n"
        "Language: English\n\n*** START OF THE PROJECT GUTENBERG EBOOK TINY TALES ***\n\n"
        "CHAPTER I\n\nOnce upon a time.\n\nCHAPTER II\n\nThe end.\n\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK TINY TALES ***\n\nLicence text that must not be read.\n"
    )
    book = read_book(write(tmp_path, "pg.txt", text))
    assert (book.metadata.title, book.metadata.authors, book.metadata.language) == (
        "Tiny Tales",
        ("Ann Writer",),
        "en",
    )
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("CHAPTER I", ("Once upon a time.",)),
        ("CHAPTER II", ("The end.",)),
    ]


def test_write_txt_fixture_round_trips(tmp_path: Path):
    book = read_book(
        write_txt(tmp_path / "b.txt", "Title", [("Alpha", ["One.", "Two."]), ("Beta", ["Three."])])
    )
    assert book.metadata.title == "Title"
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Chapter 1: Alpha", ("One.", "Two.")),
        ("Chapter 2: Beta", ("Three.",)),
    ]


def test_text_file_size_limit(tmp_path: Path):
    path = write(tmp_path, "big.txt", "word " * 1000)
    with pytest.raises(BookError, match="over the"):
        read_book(path, IngestOptions(max_file_bytes=100))


def test_binary_garbage_txt_is_read_as_latin1_with_a_warning_or_refused(tmp_path: Path):
    path = write(tmp_path, "junk.txt", bytes(range(128, 256)) * 4)
    try:
        book = read_book(path)
    except BookError:
        return
    assert any("encoding" in warning for warning in book.warnings) or book.chapters


# --- Markdown ---------------------------------------------------------------------------------------


MARKDOWN = """---
title: "Front Matter Title"
author: Ann Writer, Bob Writer
lang: en
---

# Front Matter Title

An introduction with **bold**, _italic_, `code` and a [link](http://example.com).

## The First Chapter

> A quoted line.

- item one
- item *two*

| Name | Age |
|------|-----|
| Ann  | 30  |

```python
print("not read aloud")
```

![A picture](pic.png)

Setext Chapter
--------------

Final words\\* here.
"""


def test_markdown_structure_and_markup(tmp_path: Path):
    book = read_book(write(tmp_path, "b.md", MARKDOWN))
    assert book.metadata.title == "Front Matter Title"
    assert book.metadata.authors == ("Ann Writer", "Bob Writer")
    assert book.metadata.language == "en"
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Front Matter Title", ("An introduction with bold, italic, code and a link.",)),
        (
            "The First Chapter",
            ("A quoted line.", "item one", "item two", "Name, Age", "Ann, 30", "Code listing, 1 line, skipped."),
        ),
        ("Setext Chapter", ("Final words* here.",)),
    ]
    assert any(warning.startswith("1 code listing (1 line) announced and skipped") for warning in book.warnings)


def test_markdown_image_alt_text_on_request(tmp_path: Path):
    path = write(tmp_path, "b.md", "# T\n\n![A red door](door.png)\n\nText.\n")
    assert read_book(path).chapters[0].paragraphs == ("Text.",)
    assert read_book(path, IngestOptions(image_alt_text=True)).chapters[0].paragraphs == (
        "A red door",
        "Text.",
    )


def test_markdown_without_headings(tmp_path: Path):
    assert outline(write(tmp_path, "notes.markdown", "Just *one* paragraph.\n")) == [
        ("notes", ("Just one paragraph.",))
    ]


# --- HTML -------------------------------------------------------------------------------------------


def test_html_metadata_and_tag_soup(tmp_path: Path):
    html = (
        '<html lang="fr"><head><title>Le Livre</title><meta name="author" content="Ann Writer">'
        '<meta name="description" content="A test."><style>p{}</style></head><body>'
        "<h1>Le Livre</h1><h2>Un</h2><p>Premier<p>Deuxième &amp; dernier<script>var x;</script>"
        "<h2>Deux</h2><p>Fin</body>"
    )
    book = read_book(write(tmp_path, "b.html", html))
    assert (
        book.metadata.title,
        book.metadata.authors,
        book.metadata.language,
        book.metadata.description,
    ) == ("Le Livre", ("Ann Writer",), "fr", "A test.")
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Un", ("Premier", "Deuxième & dernier")),
        ("Deux", ("Fin",)),
    ]


def test_standalone_xhtml_file(tmp_path: Path):
    xhtml = (
        '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title>'
        "</head><body><h1>Only</h1><p>Text &mdash; here.</p></body></html>"
    )
    assert outline(write(tmp_path, "b.xhtml", xhtml)) == [("Only", ("Text — here.",))]


def test_html_with_entity_declarations_is_refused(tmp_path: Path):
    html = '<!DOCTYPE html [<!ENTITY x SYSTEM "file:///etc/passwd">]><html><body><p>&x;</p></body></html>'
    with pytest.raises(BookError, match="entit"):
        read_book(write(tmp_path, "evil.html", html))
    with pytest.raises(BookError, match="entit"):
        read_book(write(tmp_path, "evil.xhtml", html))

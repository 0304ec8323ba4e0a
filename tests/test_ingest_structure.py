"""Structure that is not prose: line numbers, notes, math, running headers, nested tables of contents,
and the warnings that say what was left out. What a chapter's sentences are is what the voice is
given (``inspect --sentences`` shows the same), so most tests look at them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from books import (
    CONTAINER_XML,
    custom_epub,
    endnotes_epub,
    math_epub,
    nested_toc_epub,
    opf_document,
    poetry_epub,
    running_heads_epub,
    write_epub,
    xhtml_document,
    zip_bytes,
)

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.options import MiB
from pipeline.text import AnnouncedChapter, split_sentences
from pipeline.types import Book


def spoken(book: Book) -> list[tuple[str, list[str]]]:
    """Each chapter's title and the sentences the voice is given, announcement first."""
    return [(chapter.title, [s.text for s in split_sentences(chapter)]) for chapter in book.chapters]


def all_words(book: Book) -> str:
    return " ".join(text for _, texts in spoken(book) for text in texts)


# --- line numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_line_numbers_of_poems_and_plays_are_never_spoken(tmp_path: Path, language: str):
    book = read_book(poetry_epub(tmp_path / "poems.epub", language=language))
    poem, play = book.chapters
    if language == "en":
        assert poem.paragraphs[0] == "Shall I compare thee to a summer's day?"
        assert poem.paragraphs[-1] == "And often is his gold complexion dimm'd;"
        assert play.paragraphs[1] == "OPHELIA. Good my lord."
    else:
        assert poem.paragraphs == ("床前明月光", "疑是地上霜", "举头望明月", "低头思故乡", "春眠不觉晓", "处处闻啼鸟")
        assert play.paragraphs == ("王：明月几时有？", "李：把酒问青天。")
    assert len(poem.paragraphs) == 6
    assert not re.search(r"\d", " ".join(p for chapter in book.chapters for p in chapter.paragraphs))
    sentences = [text for _, texts in spoken(book) for text in texts[1:]]
    assert not any(re.search(r"\b(two|four|six|ten|twenty)\W*$|[二四六十]\W*$", text) for text in sentences)
    assert book.warnings == ("left out 5 line and page numbers (margin numbers are not read)",)


def test_page_numbers_classed_as_such_are_left_out(tmp_path: Path):
    body = '<h1>One</h1><p>It was a dark<span class="pagenum">[Pg 12]</span> and stormy night.</p>'
    path = custom_epub(tmp_path / "b.epub", [("c.xhtml", xhtml_document(body))])
    assert read_book(path).chapters[0].paragraphs == ("It was a dark and stormy night.",)


# --- notes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("notes_first", [False, True])
def test_endnotes_are_read_at_the_end_of_the_book_with_their_marks(tmp_path: Path, notes_first: bool):
    # the notes are read last, wherever the spine has them: the table of contents lists them last
    book = read_book(endnotes_epub(tmp_path / "b.epub", notes_first_in_spine=notes_first))
    assert spoken(book) == [
        ("Chapter One", ["Chapter One", "He entered the room and sat down.", "It was late."]),
        ("Chapter Two", ["Chapter Two", "The next day he left."]),
        (
            "Notes",
            [
                "Notes",
                "Chapter One",
                "Note one. The first note, about the room.",
                "Chapter Two",
                "Note two. The second note.",
                "Note three. The third note, about leaving.",
            ],
        ),
    ]
    assert book.warnings == ()


def test_notes_can_be_read_after_their_chapter(tmp_path: Path):
    book = read_book(endnotes_epub(tmp_path / "b.epub"), IngestOptions(notes="chapter"))
    one, two = spoken(book)
    assert one[1] == [
        "Chapter One",
        "He entered the room and sat down.",
        "It was late.",
        "Notes",
        "Note one. The first note, about the room.",
    ]
    assert two[1] == [
        "Chapter Two",
        "The next day he left.",
        "Notes",
        "Note two. The second note.",
        "Note three. The third note, about leaving.",
    ]


def test_skipped_notes_are_counted_in_a_warning_that_names_the_option(tmp_path: Path):
    book = read_book(endnotes_epub(tmp_path / "b.epub"), IngestOptions(notes="skip"))
    assert [title for title, _ in spoken(book)] == ["Chapter One", "Chapter Two"]
    assert "note" not in all_words(book).lower()
    assert book.warnings == ("left out 3 notes (--notes end or --notes chapter reads them)",)


def test_chinese_endnotes(tmp_path: Path):
    book = read_book(endnotes_epub(tmp_path / "b.epub", language="zh"))
    assert spoken(book) == [
        ("第一章", ["第一章", "他走进房间，坐了下来。", "天色已晚。"]),
        ("第二章", ["第二章", "第二天，他出发了。"]),
        ("注释", ["注释", "第一章", "注一：这是第一条注释。", "第二章", "注二：这是第二条注释。", "注三：这是第三条注释。"]),
    ]
    path = endnotes_epub(tmp_path / "c.epub", language="zh")
    assert spoken(read_book(path, IngestOptions(notes="chapter")))[0][1][-2:] == ["注释", "注一：这是第一条注释。"]


def test_every_word_of_text_and_notes_is_read_once_in_order(tmp_path: Path):
    book = read_book(endnotes_epub(tmp_path / "b.epub"))
    words = all_words(book)
    for phrase in ("He entered the room and sat down.", "The first note, about the room.", "The third note"):
        assert words.count(phrase) == 1
    assert words.index("It was late.") < words.index("The first note") < words.index("The third note")


def test_a_notes_file_outside_the_reading_order_is_still_read(tmp_path: Path):
    text = '<h1>One</h1><p>Text<a epub:type="noteref" href="n.xhtml#n1">1</a>.</p>'
    note = '<aside epub:type="footnote" id="n1"><p>A pop-up note.</p></aside>'
    # the notes marked non-linear, as pop-up notes are: not read in sequence, but read as notes
    path = custom_epub(
        tmp_path / "n.epub",
        [("c1.xhtml", xhtml_document(text)), ("n.xhtml", xhtml_document(note))],
        spine=["c1.xhtml", ("n.xhtml", False)],
    )
    assert spoken(read_book(path))[-1] == ("Notes", ["Notes", "Note one. A pop up note."])


def test_footnotes_inside_a_chapter_and_unlinked_marks(tmp_path: Path):
    body = (
        "<h1>One</h1><p>A claim<sup>1</sup> and a power 10<sup>6</sup> and x<sup>2</sup>.</p>"
        '<p>Another<a href="#fn2" class="noteref">[2]</a> claim.</p>'
        '<aside epub:type="footnote" id="fn2"><p><a href="#r2">2.</a> The second footnote.</p></aside>'
    )
    book = read_book(custom_epub(tmp_path / "b.epub", [("c.xhtml", xhtml_document(body))]))
    assert book.chapters[0].paragraphs == ("A claim and a power 106 and x2.", "Another claim.")
    assert book.chapters[-1].paragraphs == ("Note 2. The second footnote.",)


def test_markdown_and_html_footnotes(tmp_path: Path):
    markdown = tmp_path / "b.md"
    markdown.write_text(
        "# Book\n\n## One\n\nA claim[^1] here.\n\n## Two\n\nMore.\n\n[^1]: The note\n    in two lines.\n",
        encoding="utf-8",
    )
    assert spoken(read_book(markdown))[-1] == ("Notes", ["Notes", "Note one. The note in two lines."])
    html = tmp_path / "g.html"
    reference = '<a id="FNanchor_1" href="#Footnote_1" class="fnanchor">[1]</a>'
    note = '<a id="Footnote_1" href="#FNanchor_1"><span class="label">[1]</span></a> A Gutenberg note.'
    html.write_text(
        f"<html><body><h1>Book</h1><h2>ONE</h2><p>Text{reference} here.</p><h2>TWO</h2><p>Other.</p>"
        f'<h2>FOOTNOTES</h2><div class="footnote"><p>{note}</p></div></body></html>',
        encoding="utf-8",
    )
    assert spoken(read_book(html)) == [
        ("ONE", ["ONE", "Text here."]),
        ("TWO", ["TWO", "Other."]),
        ("FOOTNOTES", ["FOOTNOTES", "Note one. A Gutenberg note."]),
    ]


# --- math -----------------------------------------------------------------------------------------------


def test_mathml_is_read_from_its_alttext_or_from_its_simple_markup(tmp_path: Path):
    book = read_book(math_epub(tmp_path / "m.epub"))
    assert spoken(book)[0][1] == [
        "Math",
        "Pythagoras says x squared plus y squared equals z squared.",
        "Einstein wrote x once.",
        "x",
        "Done.",
    ]
    assert book.warnings == ("2 formulas without a text alternative read from the MathML",)


def test_chinese_mathml(tmp_path: Path):
    book = read_book(math_epub(tmp_path / "m.epub", language="zh"))
    texts = spoken(book)[0][1]
    assert "质能方程 x 很有名。" in texts and "x" in texts
    assert any("平方" in text for text in texts)
    assert "2 formulas" in book.warnings[0]


# --- running headers and footers ------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_running_headers_and_footers_are_left_out_with_a_warning(tmp_path: Path, language: str):
    book = read_book(running_heads_epub(tmp_path / "r.epub", language=language))
    for chapter in book.chapters:
        assert len(chapter.paragraphs) == 1, chapter.paragraphs
    header = "来自《手册》，第3版" if language == "zh" else "From The Manual, Version 3.2"
    assert header not in all_words(book)
    (warning,) = book.warnings
    assert warning.startswith(f"left out {15 if language == 'en' else 10} running headers and footers")
    assert header in warning


def test_a_line_shared_by_two_chapters_is_no_running_header(tmp_path: Path):
    book = read_book(running_heads_epub(tmp_path / "r.epub", chapters=2))
    assert "From The Manual, Version 3.2" in book.chapters[0].paragraphs
    assert book.warnings == ()


def test_running_headers_of_a_markdown_book(tmp_path: Path):
    chapters = "".join(f"## Chapter {n}\n\nDraft copy, do not quote\n\nText {n}.\n\n" for n in range(1, 5))
    path = tmp_path / "b.md"
    path.write_text("# Book\n\n" + chapters, encoding="utf-8")
    book = read_book(path)
    assert [chapter.paragraphs for chapter in book.chapters] == [(f"Text {n}.",) for n in range(1, 5)]
    assert "left out 4 running headers" in book.warnings[0]


# --- nested tables of contents --------------------------------------------------------------------------


def test_a_nested_toc_gives_players_the_chapters_own_titles(tmp_path: Path):
    book = read_book(nested_toc_epub(tmp_path / "a.epub"))
    assert [chapter.title for chapter in book.chapters] == [
        "THE CLOVER — I. The Beginning",  # three stories have a part 'I. The Beginning'
        "II. The Clover Grows",
        "THE ROSE — I. The Beginning",
        "II. The Rose Grows",
        "THE OAK — I. The Beginning",
        "II. The Oak Grows",
    ]
    announcements = [c.announcement if isinstance(c, AnnouncedChapter) else "" for c in book.chapters]
    assert announcements == [
        "SECTION I. THE CLOVER. I. The Beginning",
        "",
        "THE ROSE. I. The Beginning",
        "",
        "SECTION II. THE OAK. I. The Beginning",
        "",
    ]
    first, second = spoken(book)[:2]
    assert first[1] == ["SECTION one.", "THE CLOVER. one.", "The Beginning", "Story of the clover, part one."]
    assert second[1] == ["two. The Clover Grows", "Story of the clover, part two."]


# --- warnings that help ---------------------------------------------------------------------------------


def test_warnings_and_errors_name_cli_options_never_python_objects(tmp_path: Path):
    cover = xhtml_document('<section epub:type="cover"><p>Cover art.</p></section>', title="Cover")
    path = custom_epub(
        tmp_path / "b.epub",
        [("cover.xhtml", cover), ("c.xhtml", xhtml_document("<h1>One</h1><p>Text.</p>"))],
        nav='<ol><li><a href="cover.xhtml">Cover</a></li><li><a href="c.xhtml">One</a></li></ol>',
    )
    (warning,) = read_book(path).warnings
    assert "--keep-front-matter keeps them" in warning
    big = write_epub(tmp_path / "big.epub", "B", [("One", ["Text."])])
    with pytest.raises(BookError, match="--max-book-mb") as raised:
        read_book(big, IngestOptions(max_uncompressed_bytes=100))
    for text in (warning, str(raised.value)):
        assert "IngestOptions" not in text and "TextOptions" not in text


def test_one_size_limit_sets_the_byte_limits():
    options = IngestOptions.with_size_limit(2048, notes="skip")
    assert (options.max_file_bytes, options.max_uncompressed_bytes, options.max_member_bytes) == (
        2048 * MiB,
        2048 * MiB,
        512 * MiB,
    )
    assert options.notes == "skip"
    assert IngestOptions.with_size_limit(64).max_member_bytes == 64 * MiB
    with pytest.raises(ValueError):
        IngestOptions(notes="margin")


def test_a_spine_that_only_points_outside_the_book_says_so(tmp_path: Path):
    opf = opf_document(
        "Remote",
        manifest=['<item id="c1" href="https://example.com/c1.xhtml" media-type="application/xhtml+xml"/>'],
        spine=['<itemref idref="c1"/>'],
    )
    path = tmp_path / "remote.epub"
    members = {"mimetype": "application/epub+zip", "META-INF/container.xml": CONTAINER_XML}
    path.write_bytes(zip_bytes({**members, "OEBPS/content.opf": opf}))
    with pytest.raises(BookError, match="only points outside the book .*example.com/c1.xhtml") as raised:
        read_book(path)
    assert "empty spine" not in str(raised.value)


def test_a_navigation_bar_whose_links_change_from_chapter_to_chapter_is_left_out(tmp_path: Path):
    bar = 'Previous: <a href="c{0}.xhtml">Part {0}</a> | Next: <a href="c{1}.xhtml">Part {1}</a>'
    documents = [
        (f"c{n}.xhtml", xhtml_document(f"<h1>Part {n}</h1><p>Text {n}.</p><p>{bar.format(n - 1, n + 1)}</p>"))
        for n in range(1, 5)
    ]
    book = read_book(custom_epub(tmp_path / "b.epub", documents))
    assert [chapter.paragraphs for chapter in book.chapters] == [(f"Text {n}.",) for n in range(1, 5)]
    assert "left out 4 running headers and footers" in book.warnings[0]


def test_plain_text_footnotes_of_project_gutenberg(tmp_path: Path):
    path = tmp_path / "tale.txt"
    path.write_text(
        "Chapter 1\n\nIt was a dark night.[1] The wind blew.[2]\n\n[Footnote 1: A night in\nNovember.]\n\n"
        "[Footnote 2: From the north.]\n\nChapter 2\n\nThe end came soon.\n",
        encoding="utf-8",
    )
    assert spoken(read_book(path)) == [
        ("Chapter 1", ["Chapter one", "It was a dark night.", "The wind blew."]),
        ("Chapter 2", ["Chapter two", "The end came soon."]),
        ("Notes", ["Notes", "Note one. A night in November.", "Note two. From the north."]),
    ]

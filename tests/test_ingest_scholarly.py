"""Scholarly books: a section of notes keeps its own order (its opening and its parts' titles before
the notes they open), its apparatus is read as words ('V.' is 'See', chapter and verse), and a body
chapter that happens to be titled 'Footnotes' is read where it stands. English and Chinese."""

from __future__ import annotations

from pathlib import Path

from books import custom_epub, xhtml_document

from pipeline.ingest import read_book
from pipeline.text import split_sentences
from pipeline.types import Book


def spoken(book: Book) -> list[tuple[str, list[str]]]:
    return [(chapter.title, [s.text for s in split_sentences(chapter)]) for chapter in book.chapters]


def poem_with_notes(path: Path, language: str = "en") -> Path:
    """A poem whose notes document opens with a paragraph and a part title; two notes are linked,
    the third is known only by its line."""
    if language == "zh":
        poem = (
            '<h1>第一部</h1><p>四月是最残忍的月份<a href="notes.xhtml#n1">1</a>，哺育着。</p>'
            '<p>人子啊<a href="notes.xhtml#n2">2</a>，你说不出。</p>'
        )
        notes = (
            "<h1>注释</h1><p>本诗的标题和结构都受到韦斯顿女士一书的启发。</p><h2>第一部</h2>"
            '<p id="n1">第1行。参见韦斯顿的书。</p><p id="n2">第20行。参见以西结书2:1。</p><p>第23行。参见传道书12:5。</p>'
        )
        titles = ("第一部", "注释")
    else:
        poem = (
            '<h1>The Burial of the Dead</h1><p>April is the cruellest month<a href="notes.xhtml#n1">1</a>, '
            'breeding.</p><p>Son of man<a href="notes.xhtml#n2">2</a>, you cannot say.</p>'
        )
        notes = (
            "<h1>Notes</h1><p>Not only the title, but the plan of the poem were suggested by Miss Weston.</p>"
            '<h2>The Burial of the Dead</h2><p id="n1">Line 1. V. Weston: From Ritual to Romance; chapter one.</p>'
            '<p id="n2">Line 20. Cf. Ezekiel 2:1.</p><p>Line 23. Cf. Ecclesiastes 12:5.</p>'
        )
        titles = ("The Burial of the Dead", "Notes")
    documents = [
        ("poem.xhtml", xhtml_document(poem, language=language)),
        ("notes.xhtml", xhtml_document(notes, language=language)),
    ]
    nav = f'<ol><li><a href="poem.xhtml">{titles[0]}</a></li><li><a href="notes.xhtml">{titles[1]}</a></li></ol>'
    return custom_epub(path, documents, nav=nav, language=language, title="The Waste Land")


def test_a_notes_section_keeps_its_order_and_its_apparatus_is_read_as_words(tmp_path: Path):
    book = read_book(poem_with_notes(tmp_path / "p.epub"))
    assert spoken(book)[-1] == (
        "Notes",
        [
            "Notes",
            "Not only the title, but the plan of the poem were suggested by Miss Weston.",
            "The Burial of the Dead",
            "Note one. Line one.",
            "See Weston: From Ritual to Romance; chapter one.",
            "Note two. Line twenty.",
            "Compare Ezekiel chapter two, verse one.",
            "Line twenty three.",
            "Compare Ecclesiastes chapter twelve, verse five.",
        ],
    )


def test_a_chinese_notes_section_keeps_its_order(tmp_path: Path):
    book = read_book(poem_with_notes(tmp_path / "p.epub", language="zh"))
    title, texts = spoken(book)[-1]
    assert title == "注释"
    assert texts[:3] == ["注释", "本诗的标题和结构都受到韦斯顿女士一书的启发。", "第一部"]
    assert texts[3].startswith("注一：") and "以西结书二章一节" in " ".join(texts)
    assert texts[-1] == "第二十三行。参见传道书十二章五节。"


def test_a_chapter_titled_footnotes_that_holds_no_notes_is_read_where_it_stands(tmp_path: Path):
    documents = [
        ("one.xhtml", xhtml_document("<h1>Chapter One</h1><p>Prose here.</p>")),
        ("essay.xhtml", xhtml_document("<h1>Footnotes</h1><p>This essay is about the notes scholars love.</p>")),
        ("two.xhtml", xhtml_document("<h1>Chapter Two</h1><p>More prose.</p>")),
    ]
    entries = "".join(
        f'<li><a href="{name}">{title}</a></li>'
        for name, title in (("one.xhtml", "Chapter One"), ("essay.xhtml", "Footnotes"), ("two.xhtml", "Chapter Two"))
    )
    book = read_book(custom_epub(tmp_path / "e.epub", documents, nav=f"<ol>{entries}</ol>"))
    assert spoken(book) == [
        ("Chapter One", ["Chapter One", "Prose here."]),
        ("Footnotes", ["Footnotes", "This essay is about the notes scholars love."]),
        ("Chapter Two", ["Chapter Two", "More prose."]),
    ]


def test_a_table_of_contents_entry_for_the_notes_never_names_the_title_page(tmp_path: Path):
    body = (
        '<h1>THE WASTE LAND</h1><p>by T. S. Eliot</p><h2 id="p1">I. THE BURIAL OF THE DEAD</h2>'
        '<p>April is the cruellest month<a href="#n1">1</a>.</p><section epub:type="endnotes" id="notes">'
        '<h2>NOTES ON THE WASTE LAND</h2><ol><li id="n1"><p>Line 1. The note.</p></li></ol></section>'
    )
    nav = (
        '<ol><li><a href="w.xhtml#p1">I. The Burial of the Dead</a></li>'
        '<li><a href="w.xhtml#notes">Notes on the Waste Land</a></li></ol>'
    )
    path = custom_epub(tmp_path / "w.epub", [("w.xhtml", xhtml_document(body))], nav=nav, title="The Waste Land")
    first, _, notes = spoken(read_book(path))
    assert first == ("THE WASTE LAND", ["THE WASTE LAND", "by T. S. Eliot"])
    assert notes == ("NOTES ON THE WASTE LAND", ["NOTES ON THE WASTE LAND", "Note one. Line one. The note."])

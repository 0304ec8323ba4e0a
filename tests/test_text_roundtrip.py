"""Nothing lost or doubled: for every fixture book, each paragraph's sentences join back into exactly its
normalised text (modulo spaces), every sentence fits the voice, and numbering follows the contract."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from books import (
    SAMPLE_CHAPTERS,
    SAMPLE_ZH_CHAPTERS,
    endnotes_epub,
    math_epub,
    nested_toc_epub,
    poetry_epub,
    running_heads_epub,
    write_epub,
    write_html,
    write_markdown,
    write_txt,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.ingest import IngestOptions, read_book
from pipeline.text import AnnouncedChapter, TextOptions, normalize_text, segment_chapter, split_sentences
from pipeline.text.language import paragraph_language
from pipeline.text.marks import ALLOWED
from pipeline.text.sentences import cost
from pipeline.text.titles import title_parts
from pipeline.types import Book, Chapter, Sentence

WRITERS = {
    "epub3": (write_epub, ".epub"),
    "epub2": (lambda p, t, c: write_epub(p, t, c, version=2), ".epub"),
    "txt": (write_txt, ".txt"),
    "md": (write_markdown, ".md"),
    "html": (write_html, ".html"),
}
CONTENTS = {
    "english": SAMPLE_CHAPTERS,
    "chinese": SAMPLE_ZH_CHAPTERS,
    "both": SAMPLE_CHAPTERS + SAMPLE_ZH_CHAPTERS,
}


def fixture_books(tmp_path: Path) -> list[Book]:
    books = []
    for writer_name, (writer, suffix) in WRITERS.items():
        for content_name, chapters in CONTENTS.items():
            path = writer(tmp_path / f"{writer_name}-{content_name}{suffix}", "Sample Book", chapters)
            books.append(read_book(path))
    return books


def squeeze(text: str) -> str:
    return "".join(text.split())


def spoken(paragraph_index: int, source: str, options: TextOptions) -> str:
    """What ``source`` normalises to; a title in two languages, each part in its own language."""
    if paragraph_index != -1:
        return normalize_text(source, options)
    return "".join(normalize_text(part, replace(options, language=language) if language else options)
                   for part, language in title_parts(source))


@pytest.mark.parametrize(
    "options", [TextOptions(), TextOptions(max_chars=40, max_cjk_chars=20, min_chars=20)]
)
def test_every_fixture_book_round_trips(tmp_path: Path, options: TextOptions):
    for book in fixture_books(tmp_path):
        assert book.chapters, book.source
        for chapter in book.chapters:
            sentences = split_sentences(chapter, options)
            assert_contract(chapter.title, chapter.paragraphs, sentences, chapter.index)
            sources = {-1: chapter.title, **dict(enumerate(chapter.paragraphs))}
            for paragraph_index, source in sources.items():
                joined = "".join(s.text for s in sentences if s.paragraph_index == paragraph_index)
                assert squeeze(joined) == squeeze(spoken(paragraph_index, source, options)), (book.source, source)
            for sentence in sentences:
                assert ALLOWED.fullmatch(sentence.text), sentence
                assert cost(sentence.text, options.cjk_weight) <= options.max_chars, sentence


def test_books_with_notes_math_margins_and_running_heads_round_trip(tmp_path: Path):
    """Every paragraph kept (text and notes alike) is read once, in order, after the announcement."""
    books = [nested_toc_epub(tmp_path / "nested.epub")]
    for language in ("en", "zh"):
        books += [
            builder(tmp_path / f"{builder.__name__}-{language}.epub", language=language)
            for builder in (endnotes_epub, math_epub, poetry_epub, running_heads_epub)
        ]
    for path in books:
        for notes in ("end", "chapter", "skip"):
            for chapter in read_book(path, IngestOptions(notes=notes)).chapters:
                sentences = split_sentences(chapter)
                announced = chapter.announcement if isinstance(chapter, AnnouncedChapter) else chapter.title
                assert_contract(announced, chapter.paragraphs, sentences, chapter.index)
                sources = {-1: announced, **dict(enumerate(chapter.paragraphs))}
                for index, source in sources.items():
                    joined = "".join(s.text for s in sentences if s.paragraph_index == index)
                    assert squeeze(joined) == squeeze(spoken(index, source, TextOptions())), (path, source)


def assert_contract(
    title: str, paragraphs: tuple[str, ...], sentences: list[Sentence], chapter_index: int
) -> None:
    assert [s.index for s in sentences] == list(range(len(sentences)))
    assert all(s.chapter_index == chapter_index for s in sentences)
    indices = [s.paragraph_index for s in sentences]
    assert indices == sorted(indices)
    assert set(indices) <= set(range(-1, len(paragraphs)))
    assert (indices[:1] == [-1]) == bool(title.strip())


def test_the_fixture_text_itself_is_what_comes_out(tmp_path: Path):
    """The readers keep every paragraph the writers put in, in order, whatever the format."""
    for writer_name, (writer, suffix) in WRITERS.items():
        book = read_book(
            writer(tmp_path / f"{writer_name}{suffix}", "Sample Book", SAMPLE_CHAPTERS + SAMPLE_ZH_CHAPTERS)
        )
        assert [list(chapter.paragraphs) for chapter in book.chapters] == [
            paragraphs for _, paragraphs in SAMPLE_CHAPTERS + SAMPLE_ZH_CHAPTERS
        ], writer_name


def test_reading_a_chapter_at_once_equals_reading_each_paragraph_alone(tmp_path: Path):
    book = read_book(write_epub(tmp_path / "b.epub", "B", SAMPLE_CHAPTERS + SAMPLE_ZH_CHAPTERS))
    for chapter in book.chapters:
        result = segment_chapter(chapter)
        for index, paragraph in enumerate(chapter.paragraphs):
            alone = split_sentences(chapter.__class__(chapter.index, "", (paragraph,)))
            assert [s.text for s in alone] == [s.text for s in result.sentences if s.paragraph_index == index]


def test_sample_sentences_read_naturally(tmp_path: Path):
    book = read_book(write_epub(tmp_path / "b.epub", "B", SAMPLE_CHAPTERS[:1]))
    texts = [s.text for s in split_sentences(book.chapters[0])]
    assert texts[0] == "Chapter one: Arrival"
    joined = " ".join(texts)
    for phrase in (
        "Good evening, said Mister Holmes.",
        "ten thirty P M on March fifth, eighteen ninety five",
        "three dollars and fifty cents",
        "twenty percent",
        "j dot watson at example dot com",
        "example dot com",
        "minus five degrees Celsius",
        "one thousand two hundred thirty four people",
        "eighteen nineties",
        "Chapter twelve of the second volume, pages twelve to fifteen",
    ):
        assert phrase in joined, phrase


_WORDS = st.lists(
    st.sampled_from(
        [
            "Mr.",
            "etc.",
            "Chapter",
            "IV",
            "Henry",
            "VIII",
            "I",
            "3",
            "1984",
            "$5",
            "10:30",
            "km",
            "—",
            "...",
            "“",
            "”",
            "年",
            "第",
            "章",
            "2024-03-05",
            ".",
            ",",
            "\n",
            "No.",
            "~",
            "-",
            "March",
            "pp.",
            "😀",
        ]
    ),
    max_size=16,
).map(" ".join)
_ANYTHING = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_WORDS, _ANYTHING), min_size=1, max_size=4))
def test_a_chapter_normalised_at_once_keeps_every_paragraph_apart(paragraphs: list[str]):
    """Paragraphs are normalised together for speed; no rule may read across their boundary. (A
    paragraph with no language of its own, plain ASCII without an English phrase, takes its
    chapter's: alone it is English, among Chinese ones it is not; the next test.)"""
    assume(all(p.isascii() for p in paragraphs) or not any(p.isascii() and not paragraph_language(p)
                                                           for p in paragraphs))
    sentences = split_sentences(Chapter(0, "", tuple(paragraphs)))
    for index, paragraph in enumerate(paragraphs):
        joined = "".join(s.text for s in sentences if s.paragraph_index == index)
        assert squeeze(joined) == squeeze(normalize_text(paragraph))


def test_a_paragraph_with_no_language_of_its_own_is_read_in_its_chapters():
    """A section's bare numeral between Chinese paragraphs is read in Chinese; alone, in English."""
    chinese = "这一章讲的是一个很长的故事。"
    among = split_sentences(Chapter(0, "", (chinese, "IV", chinese)))
    assert [s.text for s in among if s.paragraph_index == 1] == ["四"]
    assert normalize_text("IV") == "four"


@pytest.mark.parametrize("paragraph", ["Chapter , IV .", "Antony and Cleopatra, II.", "Tristan und Isolde, iii:"])
def test_a_cited_numeral_ending_a_paragraph_reads_the_same_with_paragraphs_after_it(paragraph: str):
    """A numeral that ends its paragraph is read as it is where the paragraph ends the text (the
    chapter's paragraphs are normalised joined: the next one's start is not what follows it)."""
    alone = split_sentences(Chapter(0, "", (paragraph,)))
    followed = split_sentences(Chapter(0, "", (paragraph, "", "And then the next part began.")))
    assert [s.text for s in followed if s.paragraph_index == 0] == [s.text for s in alone]
    assert any(word in alone[0].text for word in ("four", "two", "three"))

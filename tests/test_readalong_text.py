"""Each spoken sentence's words as the book writes them, and where they stand in an EPUB: found by
the text stage (``TextOptions(written=True)``) from what ingestion carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xhtml import ExtractOptions, extract_text
from pipeline.ingest.xmlsafe import parse_xhtml
from pipeline.text import TextOptions, segment_chapter, split_sentences
from pipeline.text.written import written_spans
from pipeline.types import Chapter
from tests.books import (
    SAMPLE_CHAPTERS,
    SAMPLE_ZH_CHAPTERS,
    endnotes_epub,
    math_epub,
    nested_toc_epub,
    poetry_epub,
    running_heads_epub,
    write_epub,
    write_markdown,
)


def written(paragraph: str, title: str = "") -> list[tuple[str, str | None]]:
    sentences = split_sentences(Chapter(0, title, (paragraph,)), TextOptions(written=True))
    return [(s.text, s.written.text if s.written else None) for s in sentences if s.paragraph_index == 0]


def test_numbers_and_abbreviations_point_at_what_is_written() -> None:
    assert written("It was 1998. Mr. Smith paid $5.50 for 3 apples.") == [
        ("It was nineteen ninety eight.", "It was 1998."),
        (
            "Mister Smith paid five dollars and fifty cents for three apples.",
            "Mr. Smith paid $5.50 for 3 apples.",
        ),
    ]


def test_quotes_stay_with_the_words_they_open_and_close() -> None:
    assert [w for _, w in written('"Hello," she said. "Bye." He left... 1999 was next.')] == [
        '"Hello," she said.',
        '"Bye." He left... 1999 was next.',
    ]
    assert [w for _, w in written("他说：“你好。”然后走了。“再见。”他说。2008年，他回来了。")] == [
        "他说：“你好。”然后走了。",
        "“再见。”他说。2008年，他回来了。",
    ]


def test_a_sentence_of_the_reader_own_words_has_none() -> None:
    assert written_spans("Chapter 1", ["Part one.", "Chapter one."]) == [(0, 0), (0, 9)]


@pytest.mark.parametrize("chapters", [SAMPLE_CHAPTERS, SAMPLE_ZH_CHAPTERS])
def test_a_paragraph_sentences_cover_its_text(chapters) -> None:  # type: ignore[no-untyped-def]
    for index, (title, paragraphs) in enumerate(chapters):
        sentences = split_sentences(Chapter(index, title, tuple(paragraphs)), TextOptions(written=True))
        for number, paragraph in enumerate(paragraphs):
            own = [s.written for s in sentences if s.paragraph_index == number]
            assert all(span is not None for span in own)
            assert "".join("".join(span.text.split()) for span in own) == "".join(paragraph.split())  # type: ignore[union-attr]
            assert all(paragraph[span.start : span.end] == span.text for span in own)  # type: ignore[union-attr]


def test_finding_the_written_words_changes_no_sentence(tmp_path: Path) -> None:
    book = read_book(write_markdown(tmp_path / "b.md", "Book", SAMPLE_CHAPTERS))
    for chapter in book.chapters:
        plain = split_sentences(chapter)
        found = split_sentences(chapter, TextOptions(written=True))
        assert all(s.written is None for s in plain)
        assert [(s.index, s.paragraph_index, s.text) for s in plain] == [
            (s.index, s.paragraph_index, s.text) for s in found
        ]


def _block_texts(path: Path, document: str, language: str) -> dict[int, str]:
    with SafeZip(path, IngestOptions()) as archive:
        root = parse_xhtml(archive.read(document)).root
    text = extract_text(root, ExtractOptions(language=language), track=True)
    blocks = {block.number: block.text for block in text.blocks}
    for note in text.notes:
        for paragraph, source in zip(note.paragraphs, note.sources):
            blocks[source.place.block] = paragraph  # type: ignore[union-attr]
    for number, origins in text.origins.items():  # every character of a block knows where it is from
        assert len(origins) == len(blocks[number])
    return blocks


@pytest.mark.parametrize(
    "make, notes",
    [
        (lambda d: endnotes_epub(d / "n.epub"), "end"),
        (lambda d: endnotes_epub(d / "n.epub"), "chapter"),
        (lambda d: endnotes_epub(d / "z.epub", language="zh"), "end"),
        (lambda d: nested_toc_epub(d / "t.epub"), "end"),
        (lambda d: poetry_epub(d / "p.epub"), "end"),
        (lambda d: math_epub(d / "m.epub"), "end"),
        (lambda d: running_heads_epub(d / "r.epub"), "end"),
        (lambda d: write_epub(d / "s.epub", "S", SAMPLE_CHAPTERS), "end"),
    ],
)
def test_epub_places_find_the_written_words_in_their_document(tmp_path: Path, make, notes) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    book = read_book(path, IngestOptions(notes=notes))
    placed = 0
    documents: dict[str, dict[int, str]] = {}
    for chapter in book.chapters:
        for sentence in segment_chapter(chapter, TextOptions(written=True)).sentences:
            place = sentence.written.place if sentence.written else None
            if place is None:
                continue
            if place.document not in documents:
                documents[place.document] = _block_texts(path, place.document, book.metadata.language)
            assert documents[place.document][place.block][place.start : place.end] == sentence.written.text  # type: ignore[union-attr]
            placed += 1
    assert placed > 0


def test_notes_read_at_the_end_point_at_the_notes_without_their_mark(tmp_path: Path) -> None:
    book = read_book(endnotes_epub(tmp_path / "n.epub"))
    notes = book.chapters[-1]
    found = [
        s.written for s in split_sentences(notes, TextOptions(written=True)) if s.written and s.written.place
    ]
    assert [(w.text, w.place.document) for w in found] == [  # type: ignore[union-attr]
        ("The first note, about the room.", "OEBPS/notes.xhtml"),
        ("The second note.", "OEBPS/notes.xhtml"),
        ("The third note, about leaving.", "OEBPS/notes.xhtml"),
    ]

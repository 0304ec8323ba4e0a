"""Kindle books: an unencrypted MOBI read through KindleUnpack like the HTML it holds; DRM and
files that are no Kindle books refused with one line, before anything is unpacked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from tests.kindle_books import write_mobi
from tests.pdf_books import prose
from tests.test_ingest_pdf import words

CHAPTERS = {"Chapter 1": prose(41, 4), "Chapter 2": prose(42, 3)}
HTML = "<html><head><guide></guide></head><body>" + "".join(
    f"<h1>{title}</h1>" + "".join(f"<p>{paragraph}</p>" for paragraph in paragraphs) + "<mbp:pagebreak/>"
    for title, paragraphs in CHAPTERS.items()) + "</body></html>"


def test_a_mobi_is_read_with_its_chapters_words_and_tags(tmp_path: Path) -> None:
    book = read_book(write_mobi(tmp_path / "book.mobi", "The Kindle Book", "Kim Kindle", HTML))

    assert [chapter.title for chapter in book.chapters] == list(CHAPTERS)
    for chapter, paragraphs in zip(book.chapters, CHAPTERS.values()):
        assert [words([paragraph]) for paragraph in chapter.paragraphs] == [words([p]) for p in paragraphs]
    assert (book.metadata.title, book.metadata.authors, book.metadata.language) == (
        "The Kindle Book", ("Kim Kindle",), "en")
    assert book.format == "mobi"  # a read-along is the generated edition, as for TXT and HTML


def calibre_style_html() -> str:
    """Mobipocket markup as converters write it: headings in a large font, a contents page at the
    end that the guide points to by its byte position."""
    body = "".join(f'<p><font size="7"><b>{title}</b></font></p>' + "".join(f"<p>{p}</p>" for p in paragraphs)
                   + "<mbp:pagebreak/>" for title, paragraphs in CHAPTERS.items())
    contents = ('<p><font size="5"><b>Table of Contents</b></font></p>'
                + "".join(f"<p><a filepos=0000000000>{title}</a></p>" for title in CHAPTERS) + "<mbp:pagebreak/>")
    head = '<html><head><guide><reference type="toc" title="Table of Contents" filepos=%010d /></guide></head><body>'
    at = len((head % 0 + body).encode("utf-8"))
    return head % at + body + contents + "</body></html>"


def test_large_font_headings_are_chapters_and_the_contents_page_is_left_out(tmp_path: Path) -> None:
    path = write_mobi(tmp_path / "converted.mobi", "Converted", "Kim Kindle", calibre_style_html())

    book = read_book(path)
    kept = read_book(path, IngestOptions(keep_front_matter=True))

    assert [chapter.title for chapter in book.chapters] == list(CHAPTERS)
    assert "Table of Contents" not in " ".join(p for chapter in book.chapters for p in chapter.paragraphs)
    assert any("table of contents" in warning for warning in book.warnings)
    assert "Table of Contents" in " ".join(p for chapter in kept.chapters for p in chapter.paragraphs)


def test_a_drm_protected_book_is_refused_before_unpacking(tmp_path: Path) -> None:
    with pytest.raises(BookError, match="DRM-protected") as refused:
        read_book(write_mobi(tmp_path / "locked.azw3", "Locked", "Someone", HTML, encryption=2))

    assert refused.value.fix == "use a DRM-free copy of the book"


def test_a_book_that_claims_more_text_than_the_cap_is_refused(tmp_path: Path) -> None:
    path = write_mobi(tmp_path / "book.mobi", "Big", "Someone", HTML)

    with pytest.raises(BookError, match="says its text is"):
        read_book(path, IngestOptions(max_uncompressed_bytes=1000))


@pytest.mark.parametrize("content", [b"", b"just text, no Kindle book at all" * 10])
def test_a_file_that_is_no_kindle_book_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "book.mobi"
    path.write_bytes(content)

    with pytest.raises(BookError, match="not a Kindle book"):
        read_book(path)


def _cut(data: bytes) -> bytes:
    return data[:120]  # inside the record list


def _unknown_compression(data: bytes) -> bytes:
    first_record = int.from_bytes(data[78:82], "big")
    return data[:first_record] + b"\x00\x63" + data[first_record + 2 :]


@pytest.mark.parametrize("damage", [_cut, _unknown_compression])
def test_a_damaged_kindle_book_is_one_clear_error(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    path = write_mobi(tmp_path / "book.mobi", "Cut", "Someone", HTML)
    path.write_bytes(damage(path.read_bytes()))

    with pytest.raises(BookError, match="damaged Kindle book"):
        read_book(path)

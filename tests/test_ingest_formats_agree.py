"""One public-domain book in every format: each reader gives the EPUB's chapters and at least 98 %
of its sentences, none twice; and the CLI takes every format."""

from __future__ import annotations

import json
import re
import zipfile
from difflib import SequenceMatcher
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from pipeline.ingest import read_book
from pipeline.types import Book
from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli
from tests.kindle_books import write_mobi
from tests.office_books import OfficeChapter, write_docx, write_odt
from tests.pdf_books import PdfChapter, write_pdf, write_scanned_pdf

TITLE = "Alice's Adventures in Wonderland"
AUTHOR = "Lewis Carroll"
# Lewis Carroll, 1865: in the public domain.
CHAPTERS = [
    ("Down the Rabbit-Hole", [
        "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing "
        "to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or "
        "conversations in it, and what is the use of a book, thought Alice, without pictures or conversations?",
        "So she was considering in her own mind (as well as she could, for the hot day made her feel very "
        "sleepy and stupid), whether the pleasure of making a daisy-chain would be worth the trouble of "
        "getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran close by her.",
        "There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to "
        "hear the Rabbit say to itself, Oh dear! Oh dear! I shall be late! When she thought it over afterwards, "
        "it occurred to her that she ought to have wondered at this, but at the time it all seemed quite natural.",
        "In another moment down went Alice after it, never once considering how in the world she was to get "
        "out again. The rabbit-hole went straight on like a tunnel for some way, and then dipped suddenly "
        "down, so suddenly that Alice had not a moment to think about stopping herself.",
    ]),
    ("The Pool of Tears", [
        "Curiouser and curiouser! cried Alice (she was so much surprised, that for the moment she quite forgot "
        "how to speak good English). Now I am opening out like the largest telescope that ever was! "
        "Good-bye, feet! For when she looked down at her feet, they seemed to be almost out of sight.",
        "Just then her head struck against the roof of the hall: in fact she was now more than nine feet high, "
        "and she at once took up the little golden key and hurried off to the garden door.",
        "Poor Alice! It was as much as she could do, lying down on one side, to look through into the garden "
        "with one eye; but to get through was more hopeless than ever: she sat down and began to cry again.",
    ]),
    ("A Caucus-Race and a Long Tale", [
        "They were indeed a queer-looking party that assembled on the bank, the birds with draggled feathers, "
        "the animals with their fur clinging close to them, and all dripping wet, cross, and uncomfortable.",
        "The first question of course was, how to get dry again: they had a consultation about this, and after "
        "a few minutes it seemed quite natural to Alice to find herself talking familiarly with them, as if "
        "she had known them all her life.",
        "At last the Mouse, who seemed to be a person of authority among them, called out, Sit down, all of "
        "you, and listen to me! I will soon make you dry enough! They all sat down at once, in a large ring, "
        "with the Mouse in the middle.",
    ]),
]


def _fb2(path: Path) -> Path:
    sections = "".join(
        f"<section><title><p>{escape(title)}</p></title>"
        + "".join(f"<p>{escape(paragraph)}</p>" for paragraph in paragraphs) + "</section>"
        for title, paragraphs in CHAPTERS)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0">'
        f"<description><title-info><author><first-name>Lewis</first-name><last-name>Carroll</last-name></author>"
        f"<book-title>{escape(TITLE)}</book-title><lang>en</lang></title-info></description>"
        f"<body>{sections}</body></FictionBook>", encoding="utf-8")
    return path


def _mobi(path: Path) -> Path:
    html = "<html><head><guide></guide></head><body>" + "".join(
        f"<h1>{escape(title)}</h1>" + "".join(f"<p>{escape(paragraph)}</p>" for paragraph in paragraphs)
        + "<mbp:pagebreak/>" for title, paragraphs in CHAPTERS) + "</body></html>"
    return write_mobi(path, TITLE, AUTHOR, html)


def _fb2_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("alice.fb2", _fb2(path.with_name("inner.fb2")).read_bytes())
    return path


OFFICE = [OfficeChapter(title, paragraphs) for title, paragraphs in CHAPTERS]
WRITERS = {
    "pdf": lambda path: write_pdf(path, [PdfChapter(title, paragraphs) for title, paragraphs in CHAPTERS],
                                  title=TITLE, author=AUTHOR),
    "docx": lambda path: write_docx(path, TITLE, OFFICE, author=AUTHOR, manuscript=False),
    "odt": lambda path: write_odt(path, TITLE, OFFICE, author=AUTHOR, manuscript=False),
    "fb2": _fb2,
    "fb2.zip": _fb2_zip,
    "mobi": _mobi,
}


def sentences(book: Book) -> list[str]:
    text = " ".join(paragraph for chapter in book.chapters for paragraph in chapter.paragraphs)
    return [" ".join(sentence.split()) for sentence in re.split(r"(?<=[.!?:;])\s+", text) if sentence.strip()]


@pytest.mark.parametrize("extension", list(WRITERS))
def test_every_format_gives_the_epubs_chapters_and_sentences(tmp_path: Path, extension: str) -> None:
    epub = read_book(write_epub(tmp_path / "alice.epub", TITLE, CHAPTERS, author=AUTHOR))
    other = read_book(WRITERS[extension](tmp_path / f"alice.{extension}"))

    assert [chapter.title for chapter in other.chapters] == [chapter.title for chapter in epub.chapters]
    expected, read = sentences(epub), sentences(other)
    same = sum(block.size for block in SequenceMatcher(None, expected, read, autojunk=False).get_matching_blocks())
    assert same >= 0.98 * len(expected)
    assert len(read) <= len(expected)
    assert (other.metadata.title, other.metadata.authors) == (TITLE, (AUTHOR,))


def test_the_cli_inspects_every_format_and_refuses_a_scan_with_exit_2(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    for extension, write in WRITERS.items():
        inspected = cli(["inspect", str(write(tmp_path / f"alice.{extension}")), "--json"], env, timeout=120)
        assert inspected.returncode == 0, inspected.stderr
        assert [chapter["title"] for chapter in json.loads(inspected.stdout)["chapters"]] == [
            title for title, _ in CHAPTERS]

    scan = cli(["inspect", str(write_scanned_pdf(tmp_path / "scan.pdf", 3))], env, timeout=120)

    assert scan.returncode == 2
    errors = [line for line in scan.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "scan.pdf" in errors[0] and "no text layer" in errors[0]


def test_the_bulk_inbox_takes_every_format_and_nothing_else(tmp_path: Path) -> None:
    from jobs.bulk import find_books

    books = ["a.epub", "b.pdf", "c.docx", "d.odt", "e.fb2", "f.fb2.zip", "g.mobi", "h.azw3", "i.azw", "j.txt"]
    for name in [*books, "notes.zip", "letter.rtf", "scan.tiff"]:
        (tmp_path / name).write_bytes(b"x")

    assert sorted(path.name for path in find_books(tmp_path)) == books

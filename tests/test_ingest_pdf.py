"""PDF books: read in order, column by column, without the page furniture, chapters from the outline
or the headings; scans and hostile files refused with one line."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from pipeline.types import Book
from tests.pdf_books import (
    RUNNING_HEAD,
    PdfChapter,
    prose,
    write_flate_bomb_pdf,
    write_many_pages_pdf,
    write_pdf,
    write_scanned_pdf,
)

CHAPTERS = [
    PdfChapter("Chapter 1: The Start", prose(1, 14), footnote="A footnote that explains the start."),
    PdfChapter("Chapter 2: The Middle", prose(2, 10)),
    PdfChapter("Chapter 3: The End", prose(3, 12)),
]


def words(paragraphs: list[str] | tuple[str, ...]) -> list[str]:
    return [word for paragraph in paragraphs for word in re.findall(r"\w+", paragraph.casefold())]


def prose_read(book: Book) -> list[str]:
    return words([paragraph for chapter in book.chapters if chapter.title != "Notes"
                  for paragraph in chapter.paragraphs])


def assert_read_in_order(book: Book, chapters: list[PdfChapter]) -> None:
    """At least 98 % of the source's words read in their order, and no word read twice."""
    source = words([paragraph for chapter in chapters for paragraph in chapter.paragraphs])
    read = prose_read(book)
    matched = sum(block.size for block in SequenceMatcher(None, source, read, autojunk=False).get_matching_blocks())
    assert matched >= 0.98 * len(source)
    assert len(read) <= len(source)


def test_a_two_column_book_is_read_column_by_column_without_heads_or_page_numbers(tmp_path: Path) -> None:
    book = read_book(write_pdf(tmp_path / "book.pdf", CHAPTERS))

    assert [chapter.title for chapter in book.chapters] == [
        "Chapter 1: The Start", "Chapter 2: The Middle", "Chapter 3: The End", "Notes"]
    assert_read_in_order(book, CHAPTERS)
    spoken = [paragraph for chapter in book.chapters for paragraph in chapter.paragraphs]
    assert not any(RUNNING_HEAD.casefold() in paragraph.casefold() for paragraph in spoken)
    assert not any(chapter.title.upper() in paragraph for chapter in CHAPTERS for paragraph in spoken)
    assert not any(re.search(r"\d", paragraph) for paragraph in spoken[:-1])  # no page number, no note mark
    assert any("running headers" in warning for warning in book.warnings)
    assert (book.metadata.title, book.metadata.authors) == ("The Test Book", ("Ann Author",))


def test_paragraphs_come_back_as_they_were_set(tmp_path: Path) -> None:
    book = read_book(write_pdf(tmp_path / "book.pdf", CHAPTERS))

    for chapter, source in zip(book.chapters, CHAPTERS):
        assert [words([paragraph]) for paragraph in chapter.paragraphs] == [
            words([paragraph]) for paragraph in source.paragraphs]


def test_a_footnote_is_a_note_read_where_notes_says(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "book.pdf", CHAPTERS)

    at_end = read_book(path)
    in_chapter = read_book(path, IngestOptions(notes="chapter"))
    skipped = read_book(path, IngestOptions(notes="skip"))

    assert at_end.chapters[-1].paragraphs == ("Note 1. A footnote that explains the start.",)
    assert in_chapter.chapters[0].paragraphs[-2:] == ("Notes", "Note 1. A footnote that explains the start.")
    assert "footnote" not in " ".join(paragraph for chapter in skipped.chapters for paragraph in chapter.paragraphs)


def test_without_an_outline_chapters_follow_the_headings(tmp_path: Path) -> None:
    book = read_book(write_pdf(tmp_path / "book.pdf", CHAPTERS, outline=False, columns=1))

    assert [chapter.title for chapter in book.chapters][:3] == [chapter.title for chapter in CHAPTERS]
    assert_read_in_order(book, CHAPTERS)


def test_without_outline_or_headings_a_chapter_mark_every_ten_pages(tmp_path: Path) -> None:
    long = [PdfChapter(f"Part {number}", prose(number, 40)) for number in range(1, 4)]
    book = read_book(write_pdf(tmp_path / "book.pdf", long, outline=False, headings=False, columns=1))

    assert [chapter.title for chapter in book.chapters] == ["Pages 1 to 10", "Pages 11 to 12"]
    assert any("a chapter mark every 10 pages" in warning for warning in book.warnings)
    assert_read_in_order(book, long)


def test_a_scan_without_text_is_refused_saying_how_many_pages_lack_text(tmp_path: Path) -> None:
    with pytest.raises(BookError) as refused:
        read_book(write_scanned_pdf(tmp_path / "scan.pdf", 7))

    assert "no text layer" in str(refused.value) and "7 pages" in str(refused.value)
    assert "OCR" in refused.value.fix


def test_a_scan_with_a_stamped_line_is_refused_and_a_few_pictures_are_counted(tmp_path: Path) -> None:
    with pytest.raises(BookError, match="no text layer: 11 of its 12 pages hold no text"):
        read_book(write_scanned_pdf(tmp_path / "stamped.pdf", 12, stamped=1))

    book = read_book(write_scanned_pdf(tmp_path / "plates.pdf", 4, stamped=2))

    assert "2 of 4 pages hold no text (pictures or scans); they are not read" in book.warnings


def test_a_pdf_of_100000_pages_is_refused_before_its_pages_are_read(tmp_path: Path) -> None:
    with pytest.raises(BookError, match="100,000 pages"):
        read_book(write_many_pages_pdf(tmp_path / "huge.pdf", 100_000))


def test_a_decompression_bomb_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BookError, match="decompression bomb"):
        read_book(write_flate_bomb_pdf(tmp_path / "bomb.pdf", 64))


def test_a_file_that_is_not_a_pdf_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "fake.pdf"
    path.write_bytes(b"%PDF-1.4 this is not really a pdf")

    with pytest.raises(BookError, match="not a readable PDF"):
        read_book(path)


@pytest.mark.parametrize("image_format, mime, magic", [("JPEG", "image/jpeg", b"\xff\xd8"), ("PNG", "image/png", b"\x89PNG")])
def test_a_picture_that_fills_page_one_is_the_cover(tmp_path: Path, image_format: str, mime: str,
                                                    magic: bytes) -> None:
    from io import BytesIO

    from PIL import Image

    picture = BytesIO()
    Image.new("RGB", (120, 160), (200, 30, 30)).save(picture, image_format)
    book = read_book(write_pdf(tmp_path / "book.pdf", CHAPTERS, cover=picture.getvalue()))

    assert book.metadata.cover_mime == mime and book.metadata.cover[:len(magic)] == magic
    red, green, blue = Image.open(BytesIO(book.metadata.cover)).convert("RGB").getpixel((5, 5))
    assert red > 180 and green < 50 and blue < 50  # the picture (JPEG is lossy: near its colour)
    assert [chapter.title for chapter in book.chapters][:3] == [chapter.title for chapter in CHAPTERS]


def test_a_book_without_a_picture_on_page_one_has_no_cover(tmp_path: Path) -> None:
    assert read_book(write_pdf(tmp_path / "book.pdf", CHAPTERS)).metadata.cover is None


def test_a_right_column_of_one_line_is_read_after_the_left_column() -> None:
    from pipeline.ingest.pdf.layout import Fragment, page_lines

    left = [Fragment(f"left line {row}", 72, 700 - 14 * row, 290, 710 - 14 * row, 10) for row in range(8)]
    right = [Fragment("the last line of the chapter.", 320, 700, 520, 710, 10)]

    page = page_lines(0, [*right, *left], 612, 792)

    assert [line.text for line in page.lines] == [*(f"left line {row}" for row in range(8)), "the last line of the chapter."]


def test_a_page_of_full_lines_stays_one_column() -> None:
    from pipeline.ingest.pdf.layout import Fragment, page_lines

    lines = [Fragment(f"line {row}", 72, 700 - 14 * row, 540, 710 - 14 * row, 10) for row in range(8)]
    lines.append(Fragment("a short closing line.", 72, 580, 200, 590, 10))
    lines.append(Fragment("* * *", 290, 566, 322, 576, 10))

    assert [line.text for line in page_lines(0, lines, 612, 792).lines] == [
        *(f"line {row}" for row in range(8)), "a short closing line.", "* * *"]


def test_a_password_is_refused_and_an_owner_only_lock_is_read(tmp_path: Path) -> None:
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.pdfgen import canvas

    for name, encryption in (("locked", StandardEncryption("secret")),
                             ("print-locked", StandardEncryption("", ownerPassword="owner", canPrint=0))):
        pdf = canvas.Canvas(str(tmp_path / f"{name}.pdf"), encrypt=encryption)
        pdf.drawString(72, 700, "Words behind a lock.")
        pdf.showPage()
        pdf.save()

    with pytest.raises(BookError, match="encrypted with a password"):
        read_book(tmp_path / "locked.pdf")
    assert read_book(tmp_path / "print-locked.pdf").chapters[0].paragraphs == ("Words behind a lock.",)


def test_a_contents_entry_in_a_heading_font_is_no_chapter() -> None:
    from pipeline.ingest.pdf.layout import Line, PageLines
    from pipeline.ingest.pdf.paragraphs import pdf_blocks

    lines = (Line("Utilities . . . . . . . . 5", 72, 700, 300, 714, 14), Line("Utilities", 72, 650, 160, 664, 14),
             Line("The tools read a file.", 72, 620, 300, 630, 10))

    blocks = pdf_blocks([PageLines(0, 612, 792, lines)], 10).blocks

    assert [(block.text, block.level) for block in blocks] == [
        ("Utilities . . . . . . . . 5", 0), ("Utilities", 1), ("The tools read a file.", 0)]


def test_lines_go_on_by_their_baselines_not_their_boxes() -> None:
    from pipeline.ingest.pdf.layout import Line, PageLines
    from pipeline.ingest.pdf.paragraphs import pdf_blocks

    # boxes hug the letters: 'neda ... datata' has no descender, 'sota.' no ascender, so the
    # boxes stand 7 pt apart where the other lines' stand 4 pt apart; the baselines 13 pt, as all
    lines = tuple(Line(text, 60, base - bottom, 290 if number < 3 else 80, base + top, 10, baseline=base)
                  for number, (text, base, bottom, top) in enumerate([
                      ("daso fe vugi dabe ne", 600, 2, 7), ("lolori bene gigi ma", 587, 2, 7),
                      ("neda riribe nesobe datata", 574, 0, 7), ("sota.", 561, 0, 5)]))
    lines += (Line("Next paragraph.", 72, 533, 200, 542, 10, baseline=535),)

    blocks = pdf_blocks([PageLines(0, 612, 792, lines)], 10).blocks

    assert [block.text for block in blocks] == [
        "daso fe vugi dabe ne lolori bene gigi ma neda riribe nesobe datata sota.", "Next paragraph."]

"""PDF fixture books, written in code with ReportLab: two columns, running heads, page numbers,
words hyphenated at line ends, footnotes and an outline; and the hostile PDFs, written by hand."""

from __future__ import annotations

import io
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from reportlab.lib.utils import ImageReader
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

PAGE = (612.0, 792.0)
MARGIN = 60.0
GUTTER = 24.0
BODY = ("Times-Roman", 10.0)
LEADING = 13.0
RUNNING_HEAD = "THE TEST BOOK OF MANY WORDS"
_SYLLABLES = "ka lo mi ne ta ri so vu be da fe gi ho ju".split()


def prose(seed: int, paragraphs: int, words: int = 70) -> list[str]:
    """Paragraphs of made-up words, some long enough to be hyphenated at a line's end."""
    rng = random.Random(seed)
    result = []
    for _ in range(paragraphs):
        made = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 5)))) for _ in range(words)]
        made[0] = made[0].capitalize()
        result.append(" ".join(made) + ".")
    return result


@dataclass
class PdfChapter:
    title: str
    paragraphs: list[str]
    footnote: str = ""  # marked '1' after the first paragraph's fifth word, set at the page's foot


@dataclass
class _Line:
    text: str
    x: float
    y: float
    font: tuple[str, float] = BODY
    mark: str = ""  # a raised note mark after the text


@dataclass
class _Page:
    lines: list[_Line] = field(default_factory=list)
    foot: list[str] = field(default_factory=list)


def write_pdf(path: Path, chapters: list[PdfChapter], *, columns: int = 2, outline: bool = True,
              headings: bool = True, title: str = "The Test Book", author: str = "Ann Author",
              cover: bytes | None = None, heads: bool = True) -> Path:
    """A book of ``chapters``, each opening a page under a 20-pt heading, its text in ``columns``
    columns, drawn row by row across the columns (as some generators do). Odd pages are headed by
    ``RUNNING_HEAD``, even ones by their chapter's title and page number (unless not ``heads``);
    every page is numbered."""
    pages = _laid_out(chapters, columns, headings)
    pdf = canvas.Canvas(str(path), pagesize=PAGE)
    pdf.setTitle(title)
    pdf.setAuthor(author)
    if cover is not None:  # a page of its own, filled by the picture
        pdf.drawImage(ImageReader(io.BytesIO(cover)), 0, 0, width=PAGE[0], height=PAGE[1])
        pdf.showPage()
    current = ""
    for number, (page, chapter_title) in enumerate(pages, start=1):
        if chapter_title and outline:
            key = f"c{number}"
            pdf.bookmarkPage(key)
            pdf.addOutlineEntry(chapter_title, key, level=0)
        current = chapter_title or current
        head = RUNNING_HEAD if number % 2 else f"{current.upper()}  ·  {number}"
        _draw(pdf, page, number, head if heads else "")
        pdf.showPage()
    pdf.save()
    return path


def _laid_out(chapters: list[PdfChapter], columns: int, headings: bool) -> list[tuple[_Page, str]]:
    width = (PAGE[0] - 2 * MARGIN - (columns - 1) * GUTTER) / columns
    pages: list[tuple[_Page, str]] = []
    for chapter in chapters:
        page = _Page([_Line(chapter.title, MARGIN, PAGE[1] - 110, ("Times-Bold", 20.0))] if headings else [])
        pages.append((page, chapter.title))
        top = PAGE[1] - 150
        column, y = 0, top
        for number, paragraph in enumerate(chapter.paragraphs):
            mark_after = 5 if number == 0 and chapter.footnote else -1
            for text, mark in _wrapped(paragraph, width, mark_after):
                if y < MARGIN + 60:
                    column, y = column + 1, top
                    if column == columns:
                        page, column, y = _Page(), 0, PAGE[1] - 90
                        top = y
                        pages.append((page, ""))
                x = MARGIN + column * (width + GUTTER) + (12 if text.startswith("\t") else 0)
                page.lines.append(_Line(text.lstrip("\t"), x, y, mark=mark))
                y -= LEADING
                if mark:
                    page.foot.append(f"1 {chapter.footnote}")
            y -= 4  # paragraphs stand a little apart, as well as indented
    return pages


def _wrapped(paragraph: str, width: float, mark_after: int) -> list[tuple[str, str]]:
    """Lines of the paragraph (the first indented with a tab), long words split with a hyphen."""
    lines: list[tuple[str, str]] = []
    current, mark = "\t", ""
    for index, word in enumerate(paragraph.split()):
        trial = f"{current} {word}" if current.strip() else current + word
        if _width(trial) + (12 if trial.startswith("\t") else 0) <= width:
            current = trial
        elif len(word) >= 8 and _width(f"{current} {word[:4]}-") <= width:
            lines.append((f"{current} {word[:4]}-", mark))
            current, mark = word[4:], ""
        else:
            lines.append((current, mark))
            current, mark = word, ""
        if index == mark_after:
            mark = "1"
            lines.append((current, mark))
            current, mark = "", ""
    if current.strip():
        lines.append((current, mark))
    return lines


def _width(text: str) -> float:
    return stringWidth(text.lstrip("\t"), *BODY)


def _draw(pdf: canvas.Canvas, page: _Page, number: int, head: str) -> None:
    pdf.setFont("Times-Italic", 8)
    pdf.drawString(MARGIN, PAGE[1] - 40, head)
    for line in sorted(page.lines, key=lambda item: (-item.y, item.x)):  # row by row, across columns
        pdf.setFont(*line.font)
        pdf.drawString(line.x, line.y, line.text)
        if line.mark:
            pdf.setFont("Times-Roman", 6)
            pdf.drawString(line.x + stringWidth(line.text, *line.font) + 1, line.y + 4, line.mark)
    for index, note in enumerate(page.foot):
        pdf.setFont("Times-Roman", 8)
        pdf.drawString(MARGIN, MARGIN + 30 - 10 * index, note)
    pdf.setFont("Times-Roman", 9)
    pdf.drawCentredString(PAGE[0] / 2, MARGIN - 20, str(number))


def write_scanned_pdf(path: Path, pages: int, stamped: int = 0) -> Path:
    """Pages that hold only a drawing, no text: what a scan without OCR looks like to a reader; the
    first ``stamped`` of them with a line of text as well (a watermark, a library's stamp)."""
    pdf = canvas.Canvas(str(path), pagesize=PAGE)
    for number in range(pages):
        pdf.rect(100, 100, 300, 500, fill=1)
        if number < stamped:
            pdf.drawString(72, 40, "Digitised by the Test Library.")
        pdf.showPage()
    pdf.save()
    return path


def write_many_pages_pdf(path: Path, pages: int) -> Path:
    """A valid PDF of ``pages`` pages (one shared content stream), written by hand in seconds."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (5 + n) for n in range(pages))
        + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        _stream(b"BT /F1 12 Tf 72 700 Td (Page text) Tj ET"),
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 3 0 R >> >> >>"
    ] * pages
    return _write_objects(path, objects)


def write_flate_bomb_pdf(path: Path, megabytes: int) -> Path:
    """One page whose content stream inflates to ``megabytes`` MiB of spaces."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        _stream(b" " * (megabytes * 1024 * 1024), compress=True),
    ]
    return _write_objects(path, objects)


def _stream(data: bytes, *, compress: bool = False) -> bytes:
    if compress:
        data = zlib.compress(data, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def _write_objects(path: Path, objects: list[bytes]) -> Path:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    Path(path).write_bytes(bytes(out))
    return Path(path)

"""What stands on a PDF page but is not its prose: running heads and footers, page numbers, and
footnotes (set aside as notes, read where ``--notes`` says).

A running head is a line at the top or bottom edge of a page whose text (digits aside: '12  THE
BOOK' and '13  THE BOOK' are one) and size repeat on at least three pages and a twentieth of them.
A page number is an edge line that is only a number ('12', 'xii', 'Page 12', '- 12 -'). Footnotes are
the smaller lines at a page's foot, the first of each opening with its mark ('1', '*').
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pipeline.ingest.pdf.layout import Line, PageLines

_EDGE_ROWS = 2  # rows at the top and at the bottom of a page that may be furniture
_ISOLATION_EMS = 0.9  # the gap, in line heights, that sets furniture apart from the text
_MIN_PAGES = 3
_MIN_SHARE = 0.05
_MAX_HEAD_CHARS = 120
_PLACE_TOLERANCE = 2.5  # points between the tops of two heads at one place (ascenders differ)
_SMALL_SHARE = 0.95  # a head known by its place is set smaller than the body text
_PAGE_NUMBER = re.compile(r"^[\s\-–—.\[(]*(?:page\s+)?(?:\d{1,5}|[ivxlcdm]{1,8})[\s\-–—.\])]*$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_FOOTNOTE_SHARE = 0.92  # a footnote's font is at most this share of the body's
_FOOTNOTE_OPENING = re.compile(r"^\s*(\d{1,3}|[*†‡§]{1,3})(?:[.):]\s*|\s+|(?=[^\W\d]))(?=\S)")


@dataclass(frozen=True)
class PageNote:
    page: int
    label: str
    paragraphs: tuple[str, ...]


@dataclass
class Furniture:
    """What was taken off the pages."""

    running_heads: list[str] = field(default_factory=list)
    page_numbers: int = 0
    notes: list[PageNote] = field(default_factory=list)


def without_furniture(pages: list[PageLines], body_size: float) -> tuple[list[PageLines], Furniture]:
    """The pages without their running heads, page numbers and footnotes; and what was taken off."""
    furniture = Furniture()
    repeated = _repeated_edge_keys(pages)
    places = _head_places(pages, repeated, body_size)
    kept_pages: list[PageLines] = []
    for page in pages:
        edges = _edge_lines(page)
        kept: list[Line] = []
        for line in page.lines:
            if id(line) in edges and _PAGE_NUMBER.match(line.text):
                furniture.page_numbers += 1
            elif id(line) in edges and (_edge_key(line) in repeated or _at_head_place(line, places, body_size)):
                furniture.running_heads.append(line.text)
            else:
                kept.append(line)
        body, notes = _footnotes(page.number, kept, body_size)
        furniture.notes.extend(notes)
        kept_pages.append(PageLines(page.number, page.width, page.height, tuple(body)))
    return kept_pages, furniture


def _head_places(pages: list[PageLines], repeated: set[str], body_size: float) -> list[tuple[float, int]]:
    """Where running heads stand (their top, their size): where the heads known by their repeated
    text stand, and where small lines set apart at the top of at least three pages stand, whatever
    they say (a head that names a chapter of two pages repeats too little to be known by its text).
    Only the top counts for the second kind: footnotes end at the same place on every page."""
    places: set[tuple[float, int]] = set()
    small_tops: Counter[tuple[int, int]] = Counter()
    for page in pages:
        edges = _edge_lines(page)
        top_of_text = max((line.top for line in page.lines), default=0.0)
        for line in page.lines:
            if id(line) not in edges:
                continue
            if _edge_key(line) in repeated:
                places.add((round(line.top), round(line.size)))
            elif line.size <= _SMALL_SHARE * body_size and line.top >= top_of_text - line.size:
                small_tops[round(line.top / _PLACE_TOLERANCE), round(line.size)] += 1
    for (bucket, size), count in small_tops.items():
        near = count + small_tops[bucket - 1, size] + small_tops[bucket + 1, size]
        if near >= _MIN_PAGES:
            places.add((bucket * _PLACE_TOLERANCE, size))
    return sorted(places)


def _at_head_place(line: Line, places: list[tuple[float, int]], body_size: float) -> bool:
    return line.size <= body_size and any(
        abs(line.top - top) <= _PLACE_TOLERANCE and round(line.size) == size for top, size in places)


def _edge_lines(page: PageLines) -> set[int]:
    """The ids of the lines standing apart at the page's top and bottom: the first (or first two)
    rows when a gap wider than a line's height separates them from the text below, and likewise the
    last rows. Lines that follow the text at its own spacing (a listing at a page's top) never are."""
    rows = _rows(page.lines)
    edge: list[list[Line]] = []
    for band in (rows, rows[::-1]):
        for count in range(1, min(_EDGE_ROWS, len(band) - 1) + 1):
            inner, nearest = band[count - 1], band[count]
            upper, lower = (inner, nearest) if band is rows else (nearest, inner)
            gap = min(line.bottom for line in upper) - max(line.top for line in lower)
            if gap >= _ISOLATION_EMS * max(line.size for line in inner):
                edge.extend(band[:count])
                break
    return {id(line) for row in edge for line in row}


def _rows(lines: tuple[Line, ...]) -> list[list[Line]]:
    """The page's lines in rows, top row first: lines whose heights overlap share a row."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda item: -item.top):
        if rows and line.top > min(other.bottom for other in rows[-1]):
            rows[-1].append(line)
        else:
            rows.append([line])
    return rows


def _edge_key(line: Line) -> str:
    if len(line.text) > _MAX_HEAD_CHARS or not re.search(r"\w", line.text):
        return ""
    text = _DIGITS.sub("#", " ".join(line.text.casefold().split()))
    return f"{text}|{round(line.size)}"


def _repeated_edge_keys(pages: list[PageLines]) -> set[str]:
    counts: Counter[str] = Counter()
    for page in pages:
        edges = _edge_lines(page)
        counts.update({_edge_key(line) for line in page.lines if id(line) in edges} - {""})
    needed = max(_MIN_PAGES, _MIN_SHARE * len(pages))
    return {key for key, count in counts.items() if count >= needed}


def _footnotes(page: int, lines: list[Line], body_size: float) -> tuple[list[Line], list[PageNote]]:
    """The page's lines less its footnotes, and the notes: the small lines at its foot, each note
    opened by a mark that the page's text raises ('text¹' … '1 The note'). Small lines at the foot
    without such a mark (a caption, a listing in a small font) stay in the text."""
    raised = {mark for line in lines for mark in line.marks}
    by_height = sorted(lines, key=lambda line: line.top)
    foot: list[Line] = []
    for line in by_height:
        if line.size > _FOOTNOTE_SHARE * body_size:
            break
        foot.append(line)
    foot.sort(key=lambda line: -line.top)
    while foot and not _opens_note(foot[0], raised):
        foot.pop(0)
    if not foot:
        return lines, []
    notes: list[PageNote] = []
    label, texts = "", []
    for line in foot:
        opening = _FOOTNOTE_OPENING.match(line.text) if _opens_note(line, raised) else None
        if opening:
            if texts:
                notes.append(PageNote(page, label, (_joined(texts),)))
            label, texts = opening.group(1), [line.text[opening.end() :]]
        else:
            texts.append(line.text)
    notes.append(PageNote(page, label, (_joined(texts),)))
    taken = {id(line) for line in foot}
    return [line for line in lines if id(line) not in taken], notes


def _opens_note(line: Line, raised: set[str]) -> bool:
    opening = _FOOTNOTE_OPENING.match(line.text)
    return opening is not None and opening.group(1) in raised


def _joined(texts: list[str]) -> str:
    joined = ""
    for text in texts:
        joined = join_line(joined, text)
    return joined


def join_line(paragraph: str, line: str) -> str:
    """``line`` added to ``paragraph``: a word hyphenated at the line's end joined again."""
    line = line.strip()
    if not paragraph:
        return line
    if paragraph[-1:] in "-\xad\x02" and paragraph[-2:-1].isalpha() and line[:1].islower():
        return paragraph[:-1] + line
    return f"{paragraph} {line}"

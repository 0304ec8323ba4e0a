"""A PDF's lines → paragraphs and headings.

A paragraph ends where the space between lines grows past the usual leading, where the next line is
indented, where a line stops short with a sentence's end, or where the font size changes; it goes on
across a column or page break otherwise. A line hyphenated at its end is joined to the next.
Headings are lines in a font clearly larger than the body's, their level by size (largest 1).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import median

from pipeline.ingest.pdf.furniture import join_line
from pipeline.ingest.pdf.layout import Line, PageLines
from pipeline.ingest.xhtml import Block

_HEADING_SHARE = 1.15  # a heading's font is at least this share of the body's
_MAX_HEADING_CHARS = 200
_PARAGRAPH_GAP = 0.25  # space past the usual leading, in ems, that ends a paragraph
# a contents entry: its title, a leader of dots, its page ('Utilities . . . . . 5')
_DOT_LEADER = re.compile(r"(?:\s?\.){4,}\s*(?:\d{1,5}|[ivxlcdm]{1,8})?\s*$", re.IGNORECASE)
_SENTENCE_END = (".", "!", "?", ":", '"', "”", "’", "。", "！", "？")


@dataclass
class PdfText:
    """The blocks of a PDF, the page each starts on, and where its note marks stand."""

    blocks: list[Block] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)  # per block
    marks: list[tuple[int, int, str]] = field(default_factory=list)  # (block, page, mark)


def body_size(pages: list[PageLines]) -> float:
    """The font size most of the text is set in."""
    sizes: Counter[float] = Counter()
    for page in pages:
        for line in page.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def pdf_blocks(pages: list[PageLines], body: float) -> PdfText:
    """Paragraphs and headings of the pages, in reading order."""
    levels = _heading_levels(pages, body)
    leading = _usual_leading(pages)
    text = PdfText()
    previous: _Placed | None = None
    for page in pages:
        lefts, rights = _column_edges(page)
        for line in page.lines:
            if not line.text:
                continue
            level = levels.get(round(line.size * 2) / 2, 0) if _may_head(line.text) else 0
            here = _Placed(line, page.number, lefts[line.column], rights[line.column])
            if text.blocks and _continues(text.blocks[-1], previous, here, level, leading):
                last = text.blocks[-1]
                text.blocks[-1] = Block(join_line(last.text, line.text), last.level)
            else:
                text.blocks.append(Block(line.text, level))
                text.pages.append(page.number)
            text.marks.extend((len(text.blocks) - 1, page.number, mark) for mark in line.marks)
            previous = here
    return text


@dataclass(frozen=True)
class _Placed:
    line: Line
    page: int
    column_left: float  # the left edge of the line's column on its page
    column_right: float  # and its right edge


def _continues(block: Block, previous: _Placed | None, here: _Placed, level: int, leading: float) -> bool:
    """Whether ``here``'s line goes on with ``block`` rather than opening a paragraph or heading."""
    if previous is None or level != block.level:
        return False
    upper, line = previous.line, here.line
    same_place = previous.page == here.page and upper.column == line.column
    if level:  # a heading set on two lines
        return same_place and upper.bottom - line.top < upper.size
    if abs(line.size - upper.size) > 0.5:
        return False
    if same_place and leading and upper.baseline - line.baseline > leading + _PARAGRAPH_GAP * upper.size:
        return False  # more space than between the lines of a paragraph
    if same_place and line.left - upper.left > 0.8 * line.size:
        return False  # an indented first line
    if not same_place and line.left - here.column_left > 0.8 * line.size:
        return False  # an indented first line at the top of a column or page
    stops_short = upper.right < previous.column_right - 3 * upper.size
    return not (stops_short and block.text.rstrip().endswith(_SENTENCE_END))


def _may_head(text: str) -> bool:
    """Whether a line may be a heading: short, and not an entry of a table of contents."""
    return len(text) <= _MAX_HEADING_CHARS and not _DOT_LEADER.search(text)


def _usual_leading(pages: list[PageLines]) -> float:
    """The median distance between the baselines of two lines that follow each other in a column
    (baselines, not boxes: a line without descenders over one without ascenders looks further apart)."""
    steps = []
    for page in pages:
        for upper, lower in zip(page.lines, page.lines[1:]):
            if upper.column == lower.column and abs(upper.size - lower.size) < 0.5:
                step = upper.baseline - lower.baseline
                if 0 < step < 3 * upper.size:
                    steps.append(step)
    return median(steps) if steps else 0.0


def _column_edges(page: PageLines) -> tuple[dict[int, float], dict[int, float]]:
    """The left and right edges of each column of the page: the outermost edges of its lines."""
    lefts: dict[int, float] = {}
    rights: dict[int, float] = {}
    for line in page.lines:
        lefts[line.column] = min(lefts.get(line.column, line.left), line.left)
        rights[line.column] = max(rights.get(line.column, 0.0), line.right)
    return lefts, rights


def _heading_levels(pages: list[PageLines], body: float) -> dict[float, int]:
    """Heading level by font size: the sizes clearly above the body's, largest first, up to six."""
    sizes = {
        round(line.size * 2) / 2
        for page in pages
        for line in page.lines
        if line.size >= _HEADING_SHARE * body and re.search(r"\w", line.text)
    }
    return {size: level for level, size in enumerate(sorted(sizes, reverse=True)[:6], start=1)}

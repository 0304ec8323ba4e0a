"""A PDF page's text fragments → its lines in reading order.

PDFium gives runs of text with their boxes, in the order the file draws them, which need not be the
order they are read in (a generator may draw both columns' first lines, then both second lines).
Runs at one height are joined into lines unless a gutter separates them; a page whose lines leave a
vertical gutter near its middle is read column by column, with lines that span the gutter (a title
over both columns) read where they stand, top to bottom.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GUTTER_SPAN = (0.3, 0.7)  # where a column gutter may stand, as shares of the page width
_MIN_COLUMN_LINES = 3
_SPLIT_GAP_EMS = 1.2  # runs on one row further apart than this are in different columns
_SUPERSCRIPT_SHARE = 0.8  # a run this much smaller than its line, raised above it, is a note mark
_NOTE_MARK = re.compile(r"^[\d*†‡§]{1,3}$")


@dataclass(frozen=True)
class Fragment:
    """A run of text as PDFium boxes it: page coordinates, origin bottom left, in points."""

    text: str
    left: float
    bottom: float
    right: float
    top: float
    size: float  # font size, points
    baseline: float = 0.0  # where its letters stand (0: not known)


@dataclass(frozen=True)
class Line:
    """One line of one column: its text, box, main font size and the note marks raised in it."""

    text: str
    left: float
    bottom: float
    right: float
    top: float
    size: float
    marks: tuple[str, ...] = ()
    column: int = 0  # 0: the page's only column or a line spanning columns; 1 left, 2 right
    baseline: float = 0.0  # its main run's (0: not known)


@dataclass(frozen=True)
class PageLines:
    number: int  # from 0
    width: float
    height: float
    lines: tuple[Line, ...]  # in reading order


def page_lines(number: int, fragments: list[Fragment], width: float, height: float) -> PageLines:
    """The page's lines in reading order."""
    lines = [line for row in _rows(fragments) for line in _split_row(row)]
    gutter = _gutter(lines, width)
    if gutter is None:
        ordered = sorted(lines, key=lambda line: (-line.top, line.left))
    else:
        ordered = _column_order(lines, gutter)
    return PageLines(number, width, height, tuple(ordered))


def _rows(fragments: list[Fragment]) -> list[list[Fragment]]:
    """Fragments grouped by the height they stand at, top row first."""
    rows: list[list[Fragment]] = []
    for fragment in sorted(fragments, key=lambda item: (-item.top, item.left)):
        row = next((row for row in reversed(rows[-3:]) if _same_row(row, fragment)), None)
        if row is None:
            rows.append([fragment])
        else:
            row.append(fragment)
    return rows


def _same_row(row: list[Fragment], fragment: Fragment) -> bool:
    main = max(row, key=lambda item: item.size)
    overlap = min(main.top, fragment.top) - max(main.bottom, fragment.bottom)
    return overlap >= 0.5 * min(main.top - main.bottom, fragment.top - fragment.bottom)


def _split_row(row: list[Fragment]) -> list[Line]:
    """A row's fragments as lines, split where a gap as wide as a gutter separates them."""
    ordered = sorted(row, key=lambda item: item.left)
    groups: list[list[Fragment]] = [[ordered[0]]]
    for fragment in ordered[1:]:
        previous = groups[-1][-1]
        size = max(previous.size, fragment.size, 1.0)
        if fragment.left - previous.right > _SPLIT_GAP_EMS * size and not _is_mark(fragment, groups[-1]):
            groups.append([fragment])
        else:
            groups[-1].append(fragment)
    return [_line(group) for group in groups]


def _is_mark(fragment: Fragment, group: list[Fragment]) -> bool:
    main = max(group, key=lambda item: item.size)
    return (
        fragment.size < _SUPERSCRIPT_SHARE * main.size
        and bool(_NOTE_MARK.match(fragment.text.strip()))
        and fragment.bottom > main.bottom + 0.2 * main.size
    )


def _line(group: list[Fragment]) -> Line:
    main = max(group, key=lambda item: len(item.text.strip()) * item.size)
    parts: list[str] = []
    marks: list[str] = []
    for fragment in group:
        if fragment is not main and _is_mark(fragment, [main]):
            marks.append(fragment.text.strip())
            continue
        parts.append(fragment.text.strip())
    text = " ".join(part for part in parts if part)
    return Line(
        text,
        min(item.left for item in group),
        min(item.bottom for item in group),
        max(item.right for item in group),
        max(item.top for item in group),
        main.size,
        tuple(marks),
        baseline=main.baseline,
    )


def _gutter(lines: list[Line], width: float) -> float | None:
    """The x of a column gutter, if the page's lines leave one near its middle."""
    if len(lines) < 2 * _MIN_COLUMN_LINES:
        return None
    best: tuple[int, float] | None = None
    lo, hi = int(_GUTTER_SPAN[0] * width), int(_GUTTER_SPAN[1] * width)
    for x in range(lo, hi + 1, 2):
        crossing = sum(1 for line in lines if line.left < x < line.right)
        if best is None or crossing < best[0]:
            best = (crossing, float(x))
    if best is None:
        return None
    crossing, x = best
    left = sum(1 for line in lines if line.right <= x)
    right = sum(1 for line in lines if line.left >= x)
    # A column may hold a single line (the end of a chapter that just reaches the right column),
    # as long as the page has lines enough on the whole and few of them cross the gutter.
    if min(left, right) >= 1 and left + right >= 2 * _MIN_COLUMN_LINES and crossing <= 0.25 * max(left, right):
        return x
    return None


def _column_order(lines: list[Line], gutter: float) -> list[Line]:
    """Bands between lines that span the gutter, each read left column then right column."""
    ordered: list[Line] = []
    band: list[Line] = []

    def flush() -> None:
        for column in (1, 2):
            own = [line for line in band if _column(line, gutter) == column]
            ordered.extend(_with_column(line, column) for line in sorted(own, key=lambda item: -item.top))
        band.clear()

    for line in sorted(lines, key=lambda item: (-item.top, item.left)):
        if _column(line, gutter) == 0:
            flush()
            ordered.append(line)
        else:
            band.append(line)
    flush()
    return ordered


def _column(line: Line, gutter: float) -> int:
    if line.right <= gutter:
        return 1
    if line.left >= gutter:
        return 2
    return 0


def _with_column(line: Line, column: int) -> Line:
    return Line(line.text, line.left, line.bottom, line.right, line.top, line.size, line.marks, column,
                line.baseline)

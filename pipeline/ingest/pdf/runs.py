"""A page's characters, as PDFium reads them, joined into runs of text with their boxes.

A run goes on while the characters share a baseline and a font size and follow each other closely;
it ends at a line break PDFium infers, a change of size (a raised note mark is a run of its own),
a jump back or a gap as wide as a column gutter. Boxes come from each character, so no character
is ever read twice, however the runs' boxes overlap (which reading text by rectangle would do).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.ingest.pdf.layout import Fragment

if TYPE_CHECKING:
    import pypdfium2 as pdfium

_GAP_EMS = 1.2  # characters further apart than this are in different runs (a gutter, a tab stop)
_BASELINE_EMS = 0.3  # a baseline this far from the run's starts another run (a raised mark)
_BREAKS = frozenset("\r\n\x00")
_HYPHENS = {"\x02": "-", "\xad": "-"}  # PDFium's mark for a hyphen at a line's end; a soft hyphen


@dataclass
class _Run:
    chars: list[str] = field(default_factory=list)
    left: float = 0.0
    bottom: float = 0.0
    right: float = 0.0
    top: float = 0.0
    size: float = 0.0
    baseline: float = 0.0

    def fragment(self) -> Fragment | None:
        text = "".join(self.chars).strip()
        if not text:
            return None
        return Fragment(text, self.left, self.bottom, self.right, self.top, self.size, self.baseline)


def page_runs(textpage: pdfium.PdfTextPage) -> list[Fragment]:
    """The page's text as runs, in PDFium's character order."""
    import pypdfium2.raw as pdfium_c

    left, right, bottom, top, x, y = (ctypes.c_double() for _ in range(6))
    found: list[Fragment] = []
    run: _Run | None = None
    for index in range(pdfium_c.FPDFText_CountChars(textpage)):
        code = pdfium_c.FPDFText_GetUnicode(textpage, index)
        char = _HYPHENS.get(chr(code), chr(code)) if code else "\x00"
        if char in _BREAKS:
            _flush(run, found)
            run = None
            continue
        if char.isspace() and run is None:
            continue
        if char.isspace():
            run.chars.append(" ")  # type: ignore[union-attr]
            continue
        pdfium_c.FPDFText_GetCharBox(textpage, index, ctypes.byref(left), ctypes.byref(right),
                                     ctypes.byref(bottom), ctypes.byref(top))
        pdfium_c.FPDFText_GetCharOrigin(textpage, index, ctypes.byref(x), ctypes.byref(y))
        size = float(pdfium_c.FPDFText_GetFontSize(textpage, index)) or max(top.value - bottom.value, 1.0)
        if run is not None and not _continues(run, left.value, y.value, size):
            _flush(run, found)
            run = None
        if run is None:
            run = _Run([], left.value, bottom.value, right.value, top.value, size, y.value)
        run.chars.append(char)
        run.left, run.right = min(run.left, left.value), max(run.right, right.value)
        run.bottom, run.top = min(run.bottom, bottom.value), max(run.top, top.value)
    _flush(run, found)
    return found


def _continues(run: _Run, left: float, baseline: float, size: float) -> bool:
    em = max(run.size, size, 1.0)
    return (
        abs(size - run.size) <= 0.5
        and abs(baseline - run.baseline) <= _BASELINE_EMS * em
        and -em <= left - run.right <= _GAP_EMS * em
    )


def _flush(run: _Run | None, found: list[Fragment]) -> None:
    if run is not None and (fragment := run.fragment()) is not None:
        found.append(fragment)

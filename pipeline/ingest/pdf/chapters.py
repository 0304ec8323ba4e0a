"""Where a PDF's chapters begin: at its outline's entries (bookmarks), else at headings found by
font size, else every few pages (with a warning that says so)."""

from __future__ import annotations

import re
from collections import Counter

from pipeline.ingest.chapters import Start, heading_starts, title_key
from pipeline.ingest.pdf.document import OutlineEntry
from pipeline.ingest.pdf.paragraphs import PdfText

PAGES_PER_CHAPTER = 10  # without outline or headings, a chapter mark every this many pages
_PART_TITLE = re.compile(r"^(?:part|book|volume)\b|^第.{1,8}[部卷篇]", re.IGNORECASE)


def outline_starts(outline: list[OutlineEntry], text: PdfText) -> list[Start]:
    """Chapter starts from the outline: the entries down to the chapter level (the shallowest level
    with two entries or more, one deeper while most of its titles name parts), each with the titles
    of its parents."""
    entries = [entry for entry in outline if entry.page >= 0 and entry.title]
    level = _chapter_level(entries)
    if level is None:
        return []
    starts: list[Start] = []
    parents: dict[int, str] = {}
    for entry in entries:
        if entry.level > level:
            continue
        parents = {depth: title for depth, title in parents.items() if depth < entry.level}
        path = tuple(parents[depth] for depth in sorted(parents)) + (entry.title,)
        parents[entry.level] = entry.title
        at = _block_of(entry, text)
        if at is not None:
            starts.append(Start(at, path))
    return sorted(starts, key=lambda start: start.at)


def _chapter_level(entries: list[OutlineEntry]) -> int | None:
    counts = Counter(entry.level for entry in entries)
    levels = sorted(level for level, count in counts.items() if count >= 2)
    if not levels:
        return min(counts) if counts else None
    level = levels[0]
    while level + 1 in counts:
        titles = [entry.title for entry in entries if entry.level == level]
        if sum(1 for title in titles if _PART_TITLE.match(title)) * 2 <= len(titles):
            break
        level += 1
    return level


def _block_of(entry: OutlineEntry, text: PdfText) -> int | None:
    """The block an entry points at: on its page, the heading that says its title, else the page's
    first block (or the first block after it)."""
    key = title_key(entry.title)
    first = None
    for index, page in enumerate(text.pages):
        if page < entry.page:
            continue
        if page > entry.page:
            return index if first is None else first
        first = index if first is None else first
        block_key = title_key(text.blocks[index].text)
        if key and block_key and (block_key == key or (text.blocks[index].level and block_key in key)):
            return index
    return first


def font_heading_starts(text: PdfText) -> tuple[list[Start], str]:
    """Chapter starts at the headings found by font size, and a book title if one heading is it."""
    return heading_starts(text.blocks)


def page_starts(text: PdfText) -> list[Start]:
    """A start at the first block of every ``PAGES_PER_CHAPTER`` pages."""
    starts: list[Start] = []
    last_page = text.pages[-1] if text.pages else 0
    for index, page in enumerate(text.pages):
        group = page // PAGES_PER_CHAPTER
        if starts and text.pages[starts[-1].at] // PAGES_PER_CHAPTER == group:
            continue
        low = group * PAGES_PER_CHAPTER + 1
        high = min(low + PAGES_PER_CHAPTER - 1, last_page + 1)
        starts.append(Start(index, (f"Pages {low} to {high}",), implicit=True))
    return starts

"""Cutting a run of text blocks into chapters, shared by every format.

A reader turns its source into one list of blocks and a list of *starts*: places where a chapter
begins, each with the path of titles leading to it (``("Part One", "Chapter 1")``), from an EPUB table
of contents or from headings. Each start's chapter runs to the next start. A start whose chapter holds
no text of its own (a part title page, or a parent entry pointing where its first child points) yields
no chapter; its title lives on in its children's paths, which ``titles`` turns into the title a player
shows and the announcement a listener hears.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from pipeline.ingest.left_out import LeftOut
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.types import BookMetadata, ParagraphSource

TITLE_SEPARATOR = " — "
_MAX_TITLE_CHARS = 200
# Titles of pages that are not read by default: front and back matter a listener does not want.
_FRONT_MATTER_TITLE = re.compile(
    r"^(?:(?:front |back )?cover(?: page| image)?|title(?: page)?|half[- ]?title(?: page)?|copyright(?: page| notice)?"
    r"|(?:table of )?contents|toc|index|colophon|imprint|landmarks|page list|series page"
    r"|list of (?:illustrations|figures|tables|maps)|also by\b.*|(?:other )?(?:books|titles|works) by\b.*"
    r"|about the publisher|praise for\b.*"
    r"|封面|封底|书名页|書名頁|扉页|扉頁|版权|版權|版权页|版權頁|版权信息|版權信息|版权声明|版權聲明|目录|目錄|索引)$",
    re.IGNORECASE,
)
_TITLE_KEY_DROP = re.compile(r"[\W_]+")


@dataclass
class RawChapter:
    """A chapter as a reader found it, before empty chapters are dropped and indices assigned."""

    title: str
    paragraphs: list[str]
    path: tuple[str, ...] = ()  # the titles leading to it, outermost first, its own last; () if none
    at: int = -1  # the index of its first block in the reader's block list (-1: not known)
    anchors: dict[int, tuple[str, ...]] = field(default_factory=dict)  # paragraph -> element ids in it
    # where each paragraph stands in the book file ([] for formats without places: TXT, Markdown, HTML)
    sources: list[ParagraphSource | None] = field(default_factory=list)
    heading: str = ""  # the heading that only repeats its title, as written ('' when none)
    heading_source: ParagraphSource | None = None


@dataclass
class RawBook:
    """What a format reader returns to ``read_book``."""

    format: str
    metadata: BookMetadata
    chapters: list[RawChapter]
    warnings: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)  # set aside from the text; ``at`` is a block index
    note_refs: list[NoteRef] = field(default_factory=list)  # targets keyed as the notes' ids are
    notes_title: str = ""  # what the book calls its notes section
    formulas: int = 0  # formulas without text, stood in for by 'a formula' (once per run)
    left_out: LeftOut = field(default_factory=LeftOut)  # what else was left out or stood in for
    line_numbers: int = 0  # line and page numbers left out
    lexicon: list[tuple[str, str]] = field(default_factory=list)  # the book's own pronunciations


@dataclass(frozen=True)
class Start:
    """Where a chapter begins in a list of blocks."""

    at: int  # index of the chapter's first block
    path: tuple[str, ...]  # titles from the outermost level down to this chapter's own
    implicit: bool = False  # no table-of-contents entry: a document or heading stands in for one


@dataclass
class Section:
    """The blocks from one start to the next, titled."""

    start: Start
    lo: int
    hi: int
    title: str  # its whole path joined: 'Part One — Chapter 1'
    blocks: list[Block]
    path: tuple[str, ...] = ()  # the titles of that path worth saying, its own last
    positions: list[int] = field(default_factory=list)  # each block's index in the reader's list
    skipped: list[int] = field(default_factory=list)  # the leading blocks that only repeat its title


def title_key(text: str) -> str:
    """Case-, width- and punctuation-blind form of a title, for comparing titles and headings."""
    return _TITLE_KEY_DROP.sub("", unicodedata.normalize("NFKC", text).casefold())


def clean_title(text: str) -> str:
    text = " ".join(text.split())
    return text[:_MAX_TITLE_CHARS].strip()


def is_front_matter_title(title: str) -> bool:
    plain = " ".join(title.replace(":", " ").split()).strip(" .")
    return bool(plain) and bool(_FRONT_MATTER_TITLE.match(plain))


def title_path(path: tuple[str, ...], book_title: str) -> tuple[str, ...]:
    """The titles of a path worth saying: without the book's own title, empty ones and repeats."""
    book_key = title_key(book_title)
    kept: list[str] = []
    for label in path:
        label = clean_title(label)
        key = title_key(label)
        if not key or key == book_key:
            continue
        kept = [parent for parent in kept if title_key(parent) not in key]  # "Book 1" ⊂ "Book 1, Chapter 1"
        kept.append(label)
    return tuple(kept)


def sections(blocks: list[Block], starts: list[Start], book_title: str) -> list[Section]:
    """Cut ``blocks`` at ``starts`` (which must be sorted by position) into titled sections.

    Blocks before the first start form an untitled-by-TOC section of their own. Blocks left empty
    (a running header taken out) are no part of any section.
    """
    bounds = list(starts)
    if not bounds or bounds[0].at > 0:
        bounds.insert(0, Start(0, (), implicit=True))
    result: list[Section] = []
    for number, start in enumerate(bounds):
        hi = bounds[number + 1].at if number + 1 < len(bounds) else len(blocks)
        positions = [index for index in range(start.at, hi) if blocks[index].text]
        path, first = _path_and_body(start, [blocks[index] for index in positions], book_title)
        body = [blocks[index] for index in positions[first:]]
        result.append(Section(start, start.at, hi, TITLE_SEPARATOR.join(path), body, path, positions[first:],
                              positions[:first]))
    return result


def _path_and_body(start: Start, blocks: list[Block], book_title: str) -> tuple[tuple[str, ...], int]:
    """The section's title path, and where its body begins after leading headings that only repeat
    its title."""
    path = title_path(start.path, book_title)
    first = 0
    if not path:
        heading = _leading_heading(blocks)
        if heading is not None:
            path = title_path((blocks[heading].text,), "")
            first = heading + 1
    key = title_key(TITLE_SEPARATOR.join(path))
    while first < len(blocks) and blocks[first].level and key and title_key(blocks[first].text) in key:
        first += 1
    return path, first


def _leading_heading(blocks: list[Block]) -> int | None:
    """The index of a heading that opens the section (possibly after a short kicker line)."""
    for index, block in enumerate(blocks[:3]):
        if block.level and len(block.text) <= _MAX_TITLE_CHARS:
            return index
        if len(block.text) > 80:
            return None
    return None


def heading_starts(
    blocks: list[Block], lo: int = 0, hi: int | None = None, *, title_from_top_heading: bool = True
) -> tuple[list[Start], str]:
    """Chapter starts from the headings in ``blocks[lo:hi]``, and a book title if one heading is it.

    The chapter level is the heading level used most often (the shallowest on a tie). Shallower
    headings are parents (parts, books) whose titles prefix their chapters'; deeper headings stay in the
    text. A lone top-level heading that opens the text and sits above all others is the book's title.
    """
    hi = len(blocks) if hi is None else hi
    indexed = [(index, blocks[index]) for index in range(lo, hi) if blocks[index].level]
    if not indexed:
        return [], ""
    book_title = ""
    counts = Counter(block.level for _, block in indexed)
    top = min(counts)
    first_index, first_block = indexed[0]
    if (
        title_from_top_heading
        and counts[top] == 1
        and len(counts) > 1
        and first_block.level == top
        and first_index == lo
    ):
        book_title = clean_title(first_block.text)
        indexed = indexed[1:]
        del counts[top]
    chapter_level = max(sorted(counts), key=lambda level: counts[level])
    starts: list[Start] = []
    parents: dict[int, str] = {}
    for index, block in indexed:
        if block.level > chapter_level:
            continue
        parents = {level: title for level, title in parents.items() if level < block.level}
        path = tuple(parents[level] for level in sorted(parents)) + (block.text,)
        parents[block.level] = block.text
        starts.append(Start(index, path, implicit=True))
    return starts, book_title

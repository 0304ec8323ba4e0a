"""Plain text: decoding by trying encodings, paragraphs from blank lines, chapters from heading lines.

Headings are recognised by their shape: ``第十二章 …``/``第3卷``, ``Chapter 4: …``, ``CHAPTER IV``,
``Part Two``, ``Prologue``, ``# Title`` and, when a book uses them more than once, bare Roman numerals.
Text files that put one paragraph per line (common in Chinese novels) are recognised by their lack of
blank lines. Project Gutenberg's licence header and footer are left out.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from pipeline.ingest.chapters import RawBook, RawChapter, clean_title, heading_starts, sections, title_key
from pipeline.ingest.notes import plain_text_notes
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.running_heads import leave_out_running_heads
from pipeline.ingest.text_files import decode, read_text_file
from pipeline.ingest.xhtml import Block
from pipeline.types import BookMetadata

logger = logging.getLogger(__name__)

_CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
_NUMBER_WORD = (
    r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](?:one|two|three|four|five|six|seven|"
    r"eight|nine))?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|(?:one |a )?hundred|first|second|third|fourth|fifth|sixth|seventh|"
    r"eighth|ninth|tenth|last|final)"
)
_NUMBER = rf"(?:\d{{1,4}}|[ivxlcdm]{{1,8}}|{_NUMBER_WORD})"
_ZH_NUMBER = r"[0-9０-９零〇一二三四五六七八九十百千万两壹贰叁肆伍陆柒捌玖拾佰仟]{1,8}"
_HEADING_PATTERNS: tuple[tuple[re.Pattern[str], int], ...] = (
    (
        re.compile(
            rf"^第\s*{_ZH_NUMBER}\s*[卷部篇集](?:$|[\s:：、.．·—-].{{0,40}}|[^\s，。！？,.!?]{{1,30}})$"
        ),
        1,
    ),
    (
        re.compile(
            rf"^第\s*{_ZH_NUMBER}\s*[章回节節幕](?:$|[\s:：、.．·—-].{{0,40}}|[^\s，。！？,.!?]{{1,30}})$"
        ),
        2,
    ),
    (
        re.compile(
            r"^(?:序章|序言|序|楔子|引子|前言|尾声|尾聲|后记|後記|终章|終章|结语|結語|番外.{0,20}|附录.{0,20})$"
        ),
        2,
    ),
    (re.compile(rf"^(?:part|book|volume|vol\.)\s+{_NUMBER}\b(?:[\s.:—–-].{{0,70}})?$", re.IGNORECASE), 1),
    (re.compile(rf"^(?:chapter|chap\.)\s+{_NUMBER}\b(?:[\s.:—–-].{{0,70}})?$", re.IGNORECASE), 2),
    (
        re.compile(
            r"^(?:prologue|epilogue|preface|foreword|introduction|afterword|interlude|appendix)\b"
            r"(?:[\s.:—–-].{0,60})?$",
            re.IGNORECASE,
        ),
        2,
    ),
)
_MARKDOWN_HEADING = re.compile(r"^(#{1,6})\s+(\S.*?)\s*#*$")
_ROMAN_HEADING = re.compile(r"^[IVXLC]{1,7}\.?$")
_GUTENBERG_START = re.compile(
    r"^\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE
)
_GUTENBERG_END = re.compile(
    r"^\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE
)
_GUTENBERG_FIELD = re.compile(r"^(Title|Author|Language):\s*(.+)$", re.MULTILINE)
_BY_LINE = re.compile(r"^(?:by|作者[:：]?)\s*(.{1,80})$", re.IGNORECASE)
_MAX_HEADING_CHARS = 80


def heading_level(line: str, *, allow_weak: bool) -> int:
    """1 for a part-like heading, 2 for a chapter-like one, the '#' count for Markdown style, else 0."""
    line = line.strip()
    if not line or len(line) > _MAX_HEADING_CHARS:
        return 0
    markdown = _MARKDOWN_HEADING.match(line)
    if markdown:
        return len(markdown.group(1))
    if line.endswith(("。", "！", "？", "，", "；", ",", ";", "”", '"')):
        return 0  # a sentence, even if it starts like a heading ("番外正文。")
    for pattern, level in _HEADING_PATTERNS:
        if pattern.match(line):
            return level
    if allow_weak and _ROMAN_HEADING.match(line):
        return 2
    return 0


def read_txt(path: Path, options: IngestOptions) -> RawBook:
    """Read a plain-text book.

    Raises:
        BookError: the file cannot be read or is too large.
    """
    decoded = decode(read_text_file(path, options))
    warnings = [decoded.warning] if decoded.warning else []
    if decoded.encoding not in ("utf-8", "utf-8-sig"):
        logger.info("%s: decoded as %s", path, decoded.encoding)
    text = decoded.text.replace("\r\n", "\n").replace("\r", "\n")
    fields = {name.lower(): value.strip() for name, value in _GUTENBERG_FIELD.findall(text[:20_000])}
    text = _without_gutenberg_licence(text)
    blocks, notes, refs = plain_text_notes(text_blocks(text))
    title, authors, chapters, furniture = chapters_from_text_blocks(
        blocks, fields.get("title", ""), path.stem, title_from_top_heading=False
    )
    warnings.extend(furniture)
    metadata = BookMetadata(
        title=title,
        authors=tuple(filter(None, [fields.get("author", "")])) or authors,
        language=_language_code(fields.get("language", "")),
    )
    return RawBook("txt", metadata, chapters, warnings, notes, refs)


def _without_gutenberg_licence(text: str) -> str:
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end() :]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[: end.start()]
    return text


def _language_code(name: str) -> str:
    return {"english": "en", "chinese": "zh", "french": "fr", "german": "de"}.get(name.strip().lower(), "")


def text_blocks(text: str) -> list[Block]:
    """Paragraphs (blank-line separated, or one per line when the text has almost no blank lines)."""
    lines = text.strip("\n").split("\n")
    nonblank = sum(1 for line in lines if line.strip())
    blank_separated = _blank_line_paragraphs(lines, nonblank)
    weak = sum(1 for line in lines if _ROMAN_HEADING.match(line.strip())) >= 2
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Block(_join_lines(paragraph)))
            paragraph.clear()

    for line in lines:
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        level = heading_level(stripped, allow_weak=weak)
        if level and (not blank_separated or not paragraph or not _is_continuation(paragraph, stripped)):
            flush()
            markdown = _MARKDOWN_HEADING.match(stripped)
            blocks.append(Block(markdown.group(2) if markdown else stripped, level))
            continue
        paragraph.append(stripped)
        if not blank_separated:
            flush()
    flush()
    return blocks


def _blank_line_paragraphs(lines: list[str], nonblank: int) -> bool:
    """Whether blank lines separate paragraphs (else each line is one, as in many Chinese novels)."""
    blank = len(lines) - nonblank
    indented = sum(1 for line in lines if line.startswith(("\u3000", "  ", "\t")))
    if indented > 0.5 * nonblank and blank < 0.5 * nonblank:
        return False  # every paragraph opens with an indent: lines are paragraphs
    return blank >= 0.05 * max(nonblank, 1)


def _is_continuation(paragraph: list[str], line: str) -> bool:
    # Inside a hard-wrapped paragraph a line like "chapter 3 of the report" is text, not a heading:
    # the previous line did not end a sentence.
    return not paragraph[-1].rstrip().endswith((".", "!", "?", "。", "！", "？", '"', "”", ":", "："))


def _join_lines(lines: list[str]) -> str:
    joined = lines[0]
    for line in lines[1:]:
        glue = "" if _CJK.match(joined[-1:]) and _CJK.match(line[:1]) else " "
        joined += glue + line
    return joined


def chapters_from_text_blocks(
    blocks: list[Block], title_hint: str, fallback_title: str, *, title_from_top_heading: bool = True
) -> tuple[str, tuple[str, ...], list[RawChapter], list[str]]:
    """The book's title and authors, its chapters, from paragraphs and heading blocks, and the
    warnings about running headers and footers left out of them.

    Args:
        blocks: paragraphs and headings in reading order.
        title_hint: the title the format states (Gutenberg's 'Title:', HTML <title>), if any.
        fallback_title: used when nothing better is found: the file name.
        title_from_top_heading: whether a lone heading above all others is the book's title
            (Markdown's '# Title'); plain text uses levels for parts and chapters only.
    """
    starts, heading_title = heading_starts(blocks, title_from_top_heading=title_from_top_heading)
    if not starts:  # no headings: one chapter, named after the book
        title = clean_title(title_hint or heading_title or fallback_title)
        paragraphs = [block.text for block in blocks if not _is_title(block, title)]
        return title, (), [RawChapter(title, paragraphs, at=0)], []
    preamble_title, authors, preamble_is_title_page = _title_page(blocks[: starts[0].at])
    title = clean_title(title_hint or heading_title or preamble_title or fallback_title)
    chapters: list[RawChapter] = []
    for section in sections(blocks, starts, title):
        if section.lo == 0 and section.hi == starts[0].at and preamble_is_title_page:
            continue
        paragraphs = [block.text for block in section.blocks]
        chapter_title = section.title or (title if section.lo == 0 else "")
        chapters.append(RawChapter(chapter_title, paragraphs, section.path, section.lo))
    return title, authors, chapters, leave_out_running_heads(chapters)


def _title_page(preamble: list[Block]) -> tuple[str, tuple[str, ...], bool]:
    """A short opening (title, 'by Author') before the first heading is a title page, not text."""
    if not preamble or len(preamble) > 4 or any(_reads_like_prose(block.text) for block in preamble):
        return "", (), False
    authors = tuple(match.group(1).strip() for block in preamble if (match := _BY_LINE.match(block.text)))
    return preamble[0].text, authors, True


def _reads_like_prose(text: str) -> bool:
    return (
        len(text) > 80
        or text.rstrip().endswith((".", "!", "?", "。", "！", "？", ",", "，"))
        and not _BY_LINE.match(text)
    )


def _is_title(block: Block, title: str) -> bool:
    return bool(block.level) and title_key(block.text) == title_key(title)

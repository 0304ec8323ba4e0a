"""Markdown: chapters from ATX (``#``) and setext headings, paragraphs from blank lines.

Markup is removed, not read: emphasis marks, link targets, image sources, table rules. A fenced code
block is a listing: announced and skipped by default, as ``--code`` says (``listings``), and counted.
Footnotes (``text[^1]`` with ``[^1]: the note``) are notes: the reference is not read where it stands,
the note is read where ``--notes`` says.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from pipeline.ingest.chapters import RawBook
from pipeline.ingest.left_out import LeftOut
from pipeline.ingest.listings import announcement, chinese_around, listing_lines
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.plaintext import chapters_from_text_blocks
from pipeline.ingest.text_files import decode, read_text_file
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.types import BookMetadata

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_FIELD = re.compile(
    r"^(title|author|authors|lang|language|date|publisher|description)\s*:\s*(.+)$",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_RULE = re.compile(r"^ {0,3}(?:(?:\*\s*){3,}|(?:-\s*){3,}|(?:_\s*){3,})$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*\S+")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)|!\[([^\]]*)\]\[[^\]]*\]")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)|\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]{0,500}>")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_EMPHASIS = re.compile(r"(\*{1,3}|_{1,3}|~~)(?=\S)(.+?)(?<=\S)\1")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~>])")
_FOOTNOTE_DEFINITION = re.compile(r"^ {0,3}\[\^([^\]\s]+)\]:[ \t]*(.*)$")
_FOOTNOTE_CONTINUATION = re.compile(r"^(?: {4}|\t)(.*)$")
_FOOTNOTE_REF = re.compile(r"\[\^([^\]\s]+)\]")


def read_markdown(path: Path, options: IngestOptions) -> RawBook:
    """Read a Markdown book.

    Raises:
        BookError: the file cannot be read or is too large.
    """
    decoded = decode(read_text_file(path, options))
    text = decoded.text.replace("\r\n", "\n").replace("\r", "\n")
    fields, text = _front_matter(text)
    text, definitions = _footnote_definitions(text)
    refs: list[NoteRef] = []
    language = fields.get("lang") or fields.get("language") or ""
    left_out = LeftOut(code_mode=options.code)
    blocks = markdown_blocks(text, image_alt_text=options.image_alt_text, refs=refs, code=left_out, language=language)
    title, authors, chapters, furniture = chapters_from_text_blocks(
        blocks, fields.get("title", ""), path.stem
    )
    warnings = [decoded.warning] if decoded.warning else []
    warnings.extend(furniture)
    author_field = fields.get("author") or fields.get("authors") or ""
    metadata = BookMetadata(
        title=title,
        authors=tuple(a.strip(" '\"[]") for a in author_field.split(",") if a.strip(" '\"[]")) or authors,
        language=language,
        publisher=fields.get("publisher", ""),
        date=fields.get("date", ""),
        description=fields.get("description", ""),
    )
    notes = [
        Note((f"#{name}",), name if len(name) <= 3 else "", [inline_text(note)], len(blocks))
        for name, note in definitions.items()
        if inline_text(note)
    ]
    book = RawBook("md", metadata, chapters, warnings, notes, refs)
    book.left_out = left_out
    return book


def _footnote_definitions(text: str) -> tuple[str, dict[str, str]]:
    """The text without its footnote definitions, and the definitions' texts by name."""
    if "[^" not in text:
        return text, {}
    kept: list[str] = []
    definitions: dict[str, str] = {}
    current = ""
    for line in text.split("\n"):
        definition = _FOOTNOTE_DEFINITION.match(line)
        if definition:
            current = definition.group(1)
            definitions[current] = definition.group(2)
            continue
        continuation = _FOOTNOTE_CONTINUATION.match(line)
        if current and continuation:
            definitions[current] += " " + continuation.group(1).strip()
            continue
        if line.strip():
            current = ""
        kept.append(line)
    return "\n".join(kept), definitions


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    fields = {
        name.lower(): value.strip().strip("'\"") for name, value in _FRONT_FIELD.findall(match.group(1))
    }
    return fields, text[match.end() :]


def markdown_blocks(
    text: str,
    *,
    image_alt_text: bool = False,
    refs: list[NoteRef] | None = None,
    code: LeftOut | None = None,
    language: str = "",
) -> list[Block]:
    """Headings and paragraphs of a Markdown text.

    ``refs``: where given, footnote references are taken out of the text and added to it.
    ``code``: what becomes of fenced code (its ``code_mode``: ``listings``), and where the listings
    left out are counted; None: left out silently.
    """
    blocks: list[Block] = []
    paragraph: list[str] = []
    fence = ""
    listing: list[str] = []

    def end_listing() -> None:
        if code is not None:
            blocks.extend(_listing_blocks(listing, code, language, blocks[-1].text if blocks else ""))
        listing.clear()

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            if refs is not None and "[^" in joined:
                joined = _take_refs(joined, len(blocks), refs)
            text = inline_text(joined, image_alt_text=image_alt_text)
            if text:
                blocks.append(Block(text))
            paragraph.clear()

    for line in text.split("\n"):
        if fence:
            if line.strip().startswith(fence):
                fence = ""
                end_listing()
            else:
                listing.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            flush()
            fence = opening.group(1)[0] * 3
            continue
        if (
            not line.strip()
            or _RULE.match(line)
            or _REFERENCE_DEFINITION.match(line)
            or _TABLE_RULE.match(line)
        ):
            if paragraph and _SETEXT.match(line) and len(paragraph) == 1:
                level = 1 if line.strip().startswith("=") else 2
                blocks.append(Block(inline_text(paragraph[0]), level))
                paragraph.clear()
                continue
            flush()
            continue
        if paragraph and _SETEXT.match(line) and line.strip().startswith("=") and len(paragraph) == 1:
            blocks.append(Block(inline_text(paragraph[0]), 1))
            paragraph.clear()
            continue
        heading = _ATX.match(line)
        if heading:
            flush()
            if heading.group(2):
                blocks.append(Block(inline_text(heading.group(2)), len(heading.group(1))))
            continue
        line = _QUOTE.sub("", line)
        if _LIST_ITEM.match(line):
            flush()
            line = _LIST_ITEM.sub("", line, count=1)
        if line.lstrip().startswith("|") or line.rstrip().endswith("|") and "|" in line.strip()[:-1]:
            flush()
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            paragraph.append(", ".join(cell for cell in cells if cell))
            flush()
            continue
        paragraph.append(line.strip())
    flush()
    if fence:  # a fence never closed runs to the end
        end_listing()
    return blocks


def _listing_blocks(lines: list[str], code: LeftOut, language: str, nearby: str) -> list[Block]:
    """A fenced listing as ``code.code_mode`` says: its lines read as text, an announcement, or nothing."""
    if code.code_mode == "read":
        return [Block(line.strip()) for line in lines if line.strip()]
    code.code_listings += 1
    code.code_lines += listing_lines("\n".join(lines))
    if code.code_mode == "announce":
        return [Block(announcement(listing_lines("\n".join(lines)), chinese_around(language, nearby)))]
    return []


def _take_refs(text: str, at: int, refs: list[NoteRef]) -> str:
    for match in _FOOTNOTE_REF.finditer(text):
        name = match.group(1)
        refs.append(NoteRef(f"#{name}", name if len(name) <= 3 else "", at))
    return _FOOTNOTE_REF.sub("", text)


def inline_text(text: str, *, image_alt_text: bool = False) -> str:
    """Markdown inline markup removed: what a reader sees, not the syntax."""
    text = _IMAGE.sub(lambda m: (m.group(1) or m.group(2) or "") if image_alt_text else "", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _CODE_SPAN.sub(r"\2", text)
    text = _HTML_TAG.sub("", text)
    for _ in range(3):  # nested emphasis: ***bold italic*** or **a _b_ c**
        text = _EMPHASIS.sub(r"\2", text)
    text = _ESCAPE.sub(r"\1", text)
    return " ".join(html.unescape(text).split())

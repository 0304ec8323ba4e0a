"""Running headers and footers: lines a converter repeated at the top or bottom of many chapters
("From *The Book*, Version 3", "Previous topic / Next topic", the book's title over every chapter).
They are page furniture, not prose: left out, and counted in a warning.

A line is one when the same short text stands among the first or last few blocks of at least three
documents (chapters, for formats without documents) and of at least a fifth of them. A navigation line
of links beside such a line goes with it, whatever its links say ("Next: Chapter 4").
"""

from __future__ import annotations

import re
from collections import Counter

from pipeline.ingest.chapters import RawChapter
from pipeline.ingest.xhtml import Block

_EDGE = 3  # blocks at each end of a document that may be furniture
_MAX_CHARS = 200
_MIN_DOCUMENTS = 3
_MIN_SHARE = 0.2
_NAMED = 3
_WORD = re.compile(r"\w")
_NAVIGATION = re.compile(r"(?i:previous|prev|next|back|up|home|contents|index)|上一|下一|返回|目录")
_HEADING_WORD = re.compile(
    r"(?i:chapter|part|book|volume|section|act|scene|canto|letter|appendix|prologue|epilogue)\b"
    r"|第.{1,8}[章节回卷部篇幕]"
)


def running_heads(documents: list[list[Block]], keep: frozenset[str] = frozenset()) -> set[tuple[int, int]]:
    """(document, block) positions of the running headers and footers of ``documents``.

    ``keep``: ``line_key``s of lines that are never furniture (the chapters' own titles).
    """
    counts: Counter[str] = Counter()
    for blocks in documents:
        counts.update({_key(block) for _, block in _edges(blocks)} - {""})
    with_text = sum(1 for blocks in documents if blocks)
    needed = max(_MIN_DOCUMENTS, _MIN_SHARE * with_text)
    repeated = {key for key, count in counts.items() if count >= needed and key not in keep}
    if not repeated:
        return set()
    found: set[tuple[int, int]] = set()
    for number, blocks in enumerate(documents):
        edge = [index for index, block in _edges(blocks) if _key(block) in repeated]
        found.update((number, index) for index in edge)
        for index in edge:  # a bar of links next to a repeated line: 'Previous topic' + its link
            for near in (index - 1, index + 1):
                if 0 <= near < len(blocks) and blocks[near].links and _near_edge(near, len(blocks)):
                    found.add((number, near))
    return found


def glued_running_heads(
    documents: list[list[Block]], heads: set[str], found: set[tuple[int, int]]
) -> dict[tuple[int, int], int]:
    """Where a running header found elsewhere (``heads``, as written) runs on into the first words of
    a document's first paragraphs ('From The Manual, Version 3.2 This chapter...'): (document, block)
    → how many characters to cut. ``found``: the blocks that are headers already."""
    ordered = sorted(heads, key=len, reverse=True)
    glued: dict[tuple[int, int], int] = {}
    for number, blocks in enumerate(documents):
        for index, block in enumerate(blocks[:_EDGE]):
            if block.level or (number, index) in found:
                continue
            cut = _glued_head(block.text, ordered)
            if cut:
                glued[number, index] = cut
    return glued


def _glued_head(text: str, heads: list[str]) -> int:
    folded = text.casefold()
    for head in heads:
        end = len(head)
        if len(text) > end + 1 and folded.startswith(head.casefold()) and text[end] == " ":
            return end + 1 if text[end + 1].isalnum() else 0
    return 0


def leave_out_running_heads(chapters: list[RawChapter]) -> list[str]:
    """Take the running headers and footers out of ``chapters`` (a book without documents, whose
    chapters stand for them); the warning that says so, if any were found."""
    keep = frozenset(line_key(chapter.title) for chapter in chapters)
    found = running_heads([[Block(text) for text in chapter.paragraphs] for chapter in chapters], keep)
    if not found:
        return []
    texts = [chapters[number].paragraphs[index] for number, index in sorted(found)]
    for number, chapter in enumerate(chapters):
        kept = [index for index in range(len(chapter.paragraphs)) if (number, index) not in found]
        if len(kept) < len(chapter.paragraphs):
            anchors = chapter.anchors
            chapter.anchors = {new: anchors[old] for new, old in enumerate(kept) if old in anchors}
            if len(chapter.sources) == len(chapter.paragraphs):
                chapter.sources = [chapter.sources[index] for index in kept]
            chapter.paragraphs = [chapter.paragraphs[index] for index in kept]
    return [running_heads_warning(texts)]


def running_heads_warning(texts: list[str]) -> str:
    """'left out 24 running headers and footers repeated across chapters ('From The Book', ...)'."""
    common = [text for text, _ in Counter(texts).most_common(_NAMED)]
    named = ", ".join(f"'{text[:60]}'" for text in common)
    return f"left out {len(texts)} running headers and footers repeated across chapters ({named})"


def _edges(blocks: list[Block]) -> list[tuple[int, Block]]:
    size = len(blocks)
    indices = sorted(set(range(min(_EDGE, size))) | set(range(max(0, size - _EDGE), size)))
    return [(index, blocks[index]) for index in indices]


def _near_edge(index: int, size: int) -> bool:
    return index < _EDGE + 1 or index >= size - _EDGE - 1


def _key(block: Block) -> str:
    if block.supplied:
        return ""  # the reader's own words ('a formula', 'Code listing, ...') are never page furniture
    if block.frame and not block.links and _NAVIGATION.search(block.frame):
        return "navigation: " + line_key(block.frame)  # 'Previous: <a> | Next: <a>', links aside
    return line_key(block.text)


def line_key(text: str) -> str:
    """How a line is compared: case and spacing aside; '' for a line that is never furniture (long,
    wordless, or a chapter heading such as 'Chapter' or '第三章')."""
    if not text or len(text) > _MAX_CHARS or not _WORD.search(text) or _HEADING_WORD.match(text):
        return ""
    return " ".join(text.casefold().split())

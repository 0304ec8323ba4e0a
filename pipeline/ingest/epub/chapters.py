"""An EPUB's chapters: where each begins (the table of contents when it matches the spine, else
each document or its headings), cut by :func:`pipeline.ingest.chapters.sections`, with the front
and back matter left out unless asked for."""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from dataclasses import replace

from pipeline.ingest.chapters import (
    RawChapter,
    Section,
    Start,
    clean_title,
    heading_starts,
    sections,
    title_key,
)
from pipeline.ingest.epub.front_matter import document_front_reason, section_front_reason
from pipeline.ingest.epub.navigation import FrontMembers, TocEntry
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.epub.spine import SpineDocument
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.running_heads import glued_running_heads, line_key, running_heads, running_heads_warning
from pipeline.ingest.xhtml import Block
from pipeline.types import ParagraphSource, TextPlace

logger = logging.getLogger(__name__)

_LEFT_OUT_NAMED = 12  # front-matter pages named in the warning; the rest are counted


def epub_chapters(
    docs: list[SpineDocument],
    toc: list[TocEntry],
    front_members: FrontMembers,
    book_title: str,
    options: IngestOptions,
    reading: Reading,
) -> list[RawChapter]:
    """The chapters to read, in spine order."""
    _leave_out_running_heads(docs, toc, reading)
    blocks: list[Block] = [block for doc in docs for block in doc.text.blocks]
    for doc in docs:
        doc.front_reason = document_front_reason(doc, front_members)
    starts = _toc_starts(docs, toc)
    if not _toc_usable(starts, docs):
        if toc:
            logger.info(
                "%s: table of contents does not match the spine; chapters follow the spine", reading.path
            )
        starts = _spine_starts(docs, blocks)
    else:
        starts = _with_untitled_documents(docs, starts)
    found = sections(blocks, starts, book_title)
    return _keep_readable(found, docs, book_title, options, reading)


def _leave_out_running_heads(docs: list[SpineDocument], toc: list[TocEntry], reading: Reading) -> None:
    """Empty the running headers and footers of the book's documents (their positions stay)."""
    keep = frozenset(line_key(label) for entry in toc for label in entry.path)
    found = running_heads([doc.text.blocks for doc in docs], keep)
    texts = []
    for number, index in sorted(found):
        texts.append(docs[number].text.blocks[index].text)
    glued = glued_running_heads([doc.text.blocks for doc in docs], {text for text in texts if text}, found)
    for number, index in sorted(found):
        docs[number].text.blocks[index] = Block("")
    for (number, index), cut in sorted(glued.items()):  # the header left out, the paragraph kept
        block = docs[number].text.blocks[index]
        texts.append(block.text[:cut].rstrip())
        docs[number].text.blocks[index] = replace(block, text=block.text[cut:], start=block.start + cut)
    if texts:
        reading.warnings.append(running_heads_warning(texts))


def _toc_starts(docs: list[SpineDocument], toc: list[TocEntry]) -> list[Start]:
    by_member = {doc.member: doc for doc in docs}
    positioned: list[tuple[int, int, Start]] = []
    for order, entry in enumerate(toc):
        doc = by_member.get(entry.member)
        if doc is None:
            continue
        block = doc.text.anchors.get(entry.fragment, 0) if entry.fragment else 0
        positioned.append((doc.offset + block, order, Start(doc.offset + block, entry.path)))
    positioned.sort(key=lambda item: (item[0], item[1]))
    starts: list[Start] = []
    for at, _, start in positioned:
        if starts and starts[-1].at == at:
            # A parent and its first child point at the same place: the deeper entry names the chapter.
            if len(start.path) > len(starts[-1].path):
                starts[-1] = start
            continue
        starts.append(start)
    return starts


def _toc_usable(starts: list[Start], docs: list[SpineDocument]) -> bool:
    documents_with_text = sum(1 for doc in docs if doc.text.blocks and not doc.front_reason)
    return len(starts) >= 2 or (len(starts) == 1 and documents_with_text <= 1)


def _with_untitled_documents(docs: list[SpineDocument], starts: list[Start]) -> list[Start]:
    """Add a start for every document before the first TOC entry and every unlisted front-matter page."""
    starting_docs = {_doc_at(docs, start.at) for start in starts}
    extra: list[Start] = []
    first = starts[0].at
    for index, doc in enumerate(docs):
        if index in starting_docs or not doc.text.blocks:
            continue
        if doc.offset < first or doc.front_reason:
            extra.append(Start(doc.offset, (), implicit=True))
    return sorted(starts + extra, key=lambda start: start.at)


def _doc_at(docs: list[SpineDocument], at: int) -> int:
    """The index of the document that holds block ``at``."""
    for index in range(len(docs) - 1, -1, -1):
        if docs[index].offset <= at:
            return index
    return 0


def _spine_starts(docs: list[SpineDocument], blocks: list[Block]) -> list[Start]:
    """One chapter per document, or per heading when a document holds several chapters."""
    starts: list[Start] = []
    for doc in docs:
        if not doc.text.blocks:
            continue
        end = doc.offset + len(doc.text.blocks)
        inner, _ = heading_starts(blocks, doc.offset, end)
        if len(inner) >= 2:
            if inner[0].at > doc.offset:
                starts.append(Start(doc.offset, (), implicit=True))
            starts.extend(inner)
        else:
            starts.append(Start(doc.offset, (), implicit=True))
    return starts


def _keep_readable(
    found: list[Section], docs: list[SpineDocument], book_title: str, options: IngestOptions, reading: Reading
) -> list[RawChapter]:
    chapters: list[RawChapter] = []
    left_out: list[str] = []
    ids_at = _ids_by_block(docs)
    for section in found:
        if not section.blocks:
            continue
        doc = docs[_doc_at(docs, section.lo)]
        title = section.title or _document_title(doc, book_title)
        reason = section_front_reason(section, doc, title, book_title)
        if reason and not options.keep_front_matter:
            left_out.append(title or reason)
            continue
        anchors = {
            number: ids_at[position]
            for number, position in enumerate(section.positions)
            if position in ids_at
        }
        path = section.path or ((title,) if title else ())
        paragraphs = [block.text for block in section.blocks]
        chapter = RawChapter(title, paragraphs, path, section.lo, anchors)
        _add_sources(chapter, section, docs)
        chapters.append(chapter)
    if left_out:
        reading.warnings.append(_left_out_warning(left_out))  # the default at work: listed, not logged
    return chapters


def _add_sources(chapter: RawChapter, section: Section, docs: list[SpineDocument]) -> None:
    """Where the chapter's paragraphs and the heading that repeats its title stand in the book."""
    offsets = [doc.offset for doc in docs]

    def source(position: int) -> tuple[Block, ParagraphSource]:
        doc = docs[max(bisect_right(offsets, position) - 1, 0)]
        block = doc.text.blocks[position - doc.offset]
        return block, ParagraphSource(TextPlace(doc.member, block.number, block.start))

    chapter.sources = [
        None if block.supplied else place for block, place in map(source, section.positions)
    ]
    for position in section.skipped:
        block, heading = source(position)
        if block.level:
            chapter.heading, chapter.heading_source = block.text, heading
            return


def _left_out_warning(left_out: list[str]) -> str:
    return (
        "left out front and back matter: "
        + ", ".join(f"'{name}'" for name in left_out[:_LEFT_OUT_NAMED])
        + (f" and {len(left_out) - _LEFT_OUT_NAMED} more" if len(left_out) > _LEFT_OUT_NAMED else "")
        + " (--keep-front-matter keeps them)"
    )


def _ids_by_block(docs: list[SpineDocument]) -> dict[int, tuple[str, ...]]:
    """The element ids (as 'member#id') that open each block of the book, by the block's index."""
    found: dict[int, list[str]] = {}
    for doc in docs:
        for element_id, block in doc.text.anchors.items():
            found.setdefault(doc.offset + block, []).append(f"{doc.member}#{element_id}")
    return {position: tuple(ids) for position, ids in found.items()}


def _document_title(doc: SpineDocument, book_title: str) -> str:
    """The document's own <title>, unless it only repeats the book's title or a file name."""
    title = clean_title(doc.text.title)
    if not title or title_key(title) == title_key(book_title) or re.fullmatch(r"[\w.-]+\.x?html?", title):
        return ""
    return title

"""Front and back matter (cover, title page, copyright, contents, index, ...): pages a listener
does not want read, known by their type (guide, landmarks, ``epub:type``), their title, or their
text (copyright signs, a page of links, the book's title alone)."""

from __future__ import annotations

import re

from pipeline.ingest.chapters import Section, is_front_matter_title, title_key
from pipeline.ingest.epub.spine import SpineDocument

# epub:type values (and EPUB 2 guide types) of pages that are not read by default.
FRONT_MATTER_TYPES = frozenset(
    [
        "cover",
        "titlepage",
        "title-page",
        "halftitlepage",
        "halftitle",
        "copyright-page",
        "copyright",
        "toc",
        "loi",
        "lot",
        "lof",
        "index",
        "colophon",
        "imprint",
        "seriespage",
        "other-credits",
        "landmarks",
        "page-list",
        "doc-toc",
        "doc-index",
        "doc-colophon",
        "doc-pagelist",
    ]
)
# Types so unmistakable that a chapter-like table-of-contents entry does not make the page a chapter.
_ALWAYS_FRONT_MATTER = ("cover", "toc", "copyright-page", "index")
_COPYRIGHT_SIGNS = re.compile(
    r"©|\(c\)\s*\d{4}|copyright|all rights reserved|isbn|first published|published by|printed in"
    r"|版权所有|版權所有|著作权|著作權|出版社|印刷|书号|書號",
    re.IGNORECASE,
)


def document_front_reason(doc: SpineDocument, front_members: dict[str, str]) -> str:
    """The front-matter type of a whole document (guide, landmarks or its own ``epub:type``), or ''."""
    if doc.member in front_members:
        return front_members[doc.member]
    matched = doc.text.semantics & FRONT_MATTER_TYPES
    return min(matched) if matched else ""


def section_front_reason(section: Section, doc: SpineDocument, title: str, book_title: str) -> str:
    """Why a section is front or back matter, or '' when it is to be read."""
    if section.lo == doc.offset and doc.front_reason and not _starts_real_chapter(section, doc):
        return doc.front_reason
    if is_front_matter_title(title):
        return "titled as front matter"
    text = " ".join(block.text for block in section.blocks)
    if len(text) < 2500 and len({match.lower() for match in _COPYRIGHT_SIGNS.findall(text)}) >= 2:
        return "copyright page"
    if (
        doc.text.link_chars >= 0.6 * max(doc.text.text_chars, 1)
        and len(doc.text.blocks) >= 3
        and section.lo == doc.offset
        and section.hi >= doc.offset + len(doc.text.blocks)
    ):
        return "contents page"
    if (
        len(text) < 400
        and section.blocks
        and title_key(section.blocks[0].text) == title_key(book_title)
        and len(section.blocks) <= 5
    ):
        return "title page"
    return ""


def _starts_real_chapter(section: Section, doc: SpineDocument) -> bool:
    # A TOC entry named like a chapter on a page typed as front matter: trust the TOC only for
    # pages whose type is not one of the unmistakable ones.
    return not section.start.implicit and doc.front_reason not in _ALWAYS_FRONT_MATTER

"""The pieces a content document is read into: blocks of text, notes set aside, the references to
them, and what the document says about itself; and the small helpers that find its parts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from pipeline.ingest.left_out import LeftOut
from pipeline.ingest.origins import Origin
from pipeline.ingest.semantics import tokens
from pipeline.ingest.xmlsafe import local_name
from pipeline.types import ParagraphSource

_SPACE_AROUND_NEWLINE = re.compile(r" *\n[ \n]*")
_MULTIPLE_SPACES = re.compile(r" {2,}")


@dataclass(frozen=True)
class Block:
    """One paragraph-like piece of text; ``level`` is 1-6 for headings, 0 otherwise; ``links``: all of
    its text is link text; ``frame``: for a block that holds links, its text outside them (a
    navigation bar 'Previous: <link> | Next: <link>' has the same frame in every chapter)."""

    text: str
    level: int = 0
    links: bool = False
    frame: str = ""
    number: int = -1  # its place among its document's blocks, those of notes included (-1: none)
    supplied: bool = False  # only words the reader supplies ('Code listing, ...'): no place in the book
    start: int = 0  # characters of its text in the document before ``text`` (a running header cut off)


@dataclass
class Note:
    """A footnote or endnote, set aside from the text."""

    ids: tuple[str, ...]  # the element ids inside it, by which references find it
    label: str  # the mark it is known by ('1', '*'), '' when it shows none
    paragraphs: list[str]
    at: int  # the index of the block it stood before
    sources: list[ParagraphSource | None] = field(default_factory=list)  # per paragraph; [] where unknown


@dataclass(frozen=True)
class NoteRef:
    """Where the text points to a note."""

    target: str  # the reference's href, as written
    label: str
    at: int  # the index of the block it stands in


@dataclass
class XhtmlText:
    """What a content document says, in reading order."""

    blocks: list[Block] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)  # element id -> index of the block it opens
    title: str = ""  # <head><title>
    semantics: frozenset[str] = frozenset()  # epub:type/role tokens of <html>, <body> and their sections
    link_chars: int = 0  # characters of text inside <a href>, to recognise a contents page
    text_chars: int = 0
    images: int = 0
    notes: list[Note] = field(default_factory=list)
    note_refs: list[NoteRef] = field(default_factory=list)
    notes_title: str = ""  # the heading of a notes section ('Notes', '注释'), if it has one
    line_numbers: int = 0  # line and page numbers left out
    formulas: int = 0  # formulas without text, stood in for by 'a formula' (once per run)
    left_out: LeftOut = field(default_factory=LeftOut)  # what else was left out or stood in for
    # with extract_text(track=True): each block's characters, by block number, to the text they came
    # from (None: words the reader supplies, such as a cell separator)
    origins: dict[int, list[Origin | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExtractOptions:
    image_alt_text: bool = False
    language: str = ""  # the book's language, for words the reader supplies ('a formula' or '公式')
    code: str = "announce"  # code listings: "announce" (and skip), "skip", or "read" (``listings``)


def document_semantics(root: etree._Element) -> frozenset[str]:
    found = set(tokens(root))
    body = find_body(root)
    found |= tokens(body)
    for child in body:
        if local_name(child) in ("section", "div", "article", "nav", "header"):
            found |= tokens(child)
    return frozenset(found)


def find_body(root: etree._Element) -> etree._Element:
    for child in root:
        if local_name(child) == "body":
            return child
    return root


def head_title(root: etree._Element) -> str:
    for child in root:
        if local_name(child) == "head":
            for item in child:
                if local_name(item) == "title":
                    return " ".join("".join(item.itertext()).split())
    return ""


def tidy(text: str) -> str:
    if "\n" in text:
        text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    if "  " in text:
        text = _MULTIPLE_SPACES.sub(" ", text)
    return text.strip()

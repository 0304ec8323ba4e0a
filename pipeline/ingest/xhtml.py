"""XHTML/HTML → paragraphs of plain text, keeping where each element id falls.

A content document becomes a list of blocks (paragraphs, headings, list items, table rows, quotes),
each one string. Element ids are mapped to the block they open, so a table of contents that points
at ``chapter.xhtml#part2`` can start a chapter in the middle of a file.

What is not prose (``semantics``) is kept out of the blocks: notes are set aside with the references
that point to them, for ``notes`` to place; line and page numbers are counted and left out; math is
read from its ``alttext``, or as the word "formula" (counted) where it has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from pipeline.ingest.origins import Origin, Part, block_origins
from pipeline.ingest.semantics import (
    BACKLINK,
    EPUB_TYPE,
    HIDDEN,
    LINE_NUMBER,
    MATH,
    NOTE,
    NOTE_MARK,
    NOTE_REF,
    NOTES,
    kind,
    math_text,
    note_label,
    text_of,
    tokens,
)
from pipeline.ingest.xmlsafe import local_name
from pipeline.types import ParagraphSource, TextPlace

__all__ = ["EPUB_TYPE", "Block", "ExtractOptions", "Note", "NoteRef", "XhtmlText", "extract_text"]

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset(
    "p div section article aside header footer main nav figure figcaption blockquote pre li ul ol dl dt "
    "dd table thead tbody tfoot tr caption hr address center body html details summary fieldset legend "
    "hgroup h1 h2 h3 h4 h5 h6 dialog search".split()
)
# Never read: code, styling, ruby annotations (pinyin/furigana would double the text), embedded media,
# form controls. <title> is read separately as a hint, never as body text.
_SKIPPED = frozenset(
    "script style head title template noscript rt rp object embed iframe audio video canvas svg button "
    "input select textarea map area link meta base".split()
)
_CELLS = frozenset(("td", "th"))
_MAX_DEPTH = 150  # elements nested deeper are read as plain text, keeping Python's recursion bounded
_XML_SPACE = re.compile(r"[ \t\n\r\f]+")
_SPACE_AROUND_NEWLINE = re.compile(r" *\n[ \n]*")
_MULTIPLE_SPACES = re.compile(r" {2,}")
_FORMULA = "\ue000"  # stands for a formula without text until its block's language is known
_CJK = re.compile(r"[\u4e00-\u9fff]")


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
    formulas: int = 0  # formulas without text, read as 'formula'
    # with extract_text(track=True): each block's characters, by block number, to the text they came
    # from (None: words the reader supplies, such as a cell separator)
    origins: dict[int, list[Origin | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExtractOptions:
    image_alt_text: bool = False
    language: str = ""  # the book's language, for words the reader supplies ('formula' or '公式')


def extract_text(
    root: etree._Element, options: ExtractOptions = ExtractOptions(), *, track: bool = False
) -> XhtmlText:
    """Read a parsed (X)HTML document into blocks of text.

    Args:
        root: the document's root element (``<html>``), parsed by ``xmlsafe``.
        options: whether image alt text is read, and the book's language.
        track: also record where each character of each block comes from (``XhtmlText.origins``),
            for a read-along edition that marks sentences in the document.

    Returns:
        The blocks, the position of every element id, the notes set aside, and hints about the
        document's role.
    """
    result = XhtmlText()
    result.title = _head_title(root)
    result.semantics = _document_semantics(root)
    language = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang") or options.language
    walker = _Walker(result, options, language=language, track=track)
    walker.walk(_find_body(root))
    walker.flush()
    result.text_chars = sum(len(block.text) for block in result.blocks)
    return result


class _Walker:
    """Depth-first walk that accumulates inline text and cuts it into blocks at block elements."""

    def __init__(
        self,
        result: XhtmlText,
        options: ExtractOptions,
        *,
        language: str = "",
        in_note: bool = False,
        track: bool = False,
        counter: list[int] | None = None,
        origins: dict[int, list[Origin | None]] | None = None,
    ) -> None:
        self.result = result
        self.options = options
        self.language = language
        self.in_note = in_note
        self.track = track
        self.counter = counter if counter is not None else [0]  # blocks numbered so far, notes' included
        self.origins = origins if origins is not None else result.origins
        self.sources: list[Part | None] = []  # while tracking: where each of ``parts`` comes from
        self.first_mark = ""  # in a note: its own mark, which links back to the reference
        self.parts: list[str] = []
        self.unlinked: list[str] = []  # the parts outside links, while the block holds any link
        self.level = 0
        self.in_link = False
        self.block_link_chars = 0
        self.preformatted = False
        self.depth = 0

    def flush(self) -> None:
        if not self.parts:
            return
        text = _tidy("".join(self.parts))
        frame = _tidy("".join(self.unlinked)) if self.block_link_chars else ""
        parts, sources = self.parts, self.sources
        self.parts, self.unlinked, self.sources = [], [], []
        linked, self.block_link_chars = self.block_link_chars, 0
        word = ""
        if _FORMULA in text:
            word = "公式" if _CJK.search(text) or self.language.lower().startswith("zh") else "formula"
            text = _tidy(text.replace(_FORMULA, f" {word} "))
        if text:
            links = linked >= len(text.replace(" ", "")) > 0
            number = self.counter[0]
            self.counter[0] += 1
            self.result.blocks.append(Block(text, self.level, links, frame, number))
            if self.track:
                self.origins[number] = block_origins(parts, sources, text, _FORMULA, word)

    def text(self, text: str | None, element: etree._Element | None = None, tail: bool = False) -> None:
        """Add ``text``: ``element``'s text (or with ``tail``, its tail); None: the reader's own."""
        if not text:
            return
        if self.track:
            self.sources.append((element, tail, text) if element is not None else None)
        if not self.preformatted and (
            "\n" in text or "\t" in text or "\r" in text or "  " in text or "\f" in text
        ):
            text = _XML_SPACE.sub(" ", text)
        if self.in_link:
            chars = len(text.replace(" ", ""))
            self.result.link_chars += chars
            self.block_link_chars += chars
        else:
            self.unlinked.append(text)
        self.parts.append(text)

    def _supplied(self, text: str) -> None:
        """Add words or marks that the reader supplies (kept as they are: no space is folded)."""
        self.parts.append(text)
        if self.track:
            self.sources.append(None)

    def walk(self, element: etree._Element) -> None:
        name = local_name(element)
        if not name or name in _SKIPPED:
            return
        what = kind(element, name, self.in_note)
        if what:
            self._set_aside(element, name, what)
            return
        element_id = element.get("id") or (element.get("name") if name == "a" else None)
        if element_id:
            self.result.anchors.setdefault(element_id, len(self.result.blocks))
        if self.depth >= _MAX_DEPTH:  # absurd nesting (hostile or broken): its text, without structure
            self.text("".join(element.itertext()))
            return
        if name == "p" and not len(element) and not self.preformatted:
            self._plain_paragraph(element)  # most of a book: a <p> holding only text
            return
        self.depth += 1
        if name in _BLOCKS:
            self._walk_block(element, name)
        else:
            self._walk_inline(element, name)
        self.depth -= 1

    def _set_aside(self, element: etree._Element, name: str, what: str) -> None:
        """An element that is not read where it stands (see ``semantics``)."""
        if what == LINE_NUMBER:
            self.result.line_numbers += 1
        elif what == BACKLINK and not self.first_mark and NOTE_MARK.match(text_of(element).strip()):
            self.first_mark = text_of(element)  # the note's own number, linking back: '[1]' 
        elif what == NOTE_REF:
            link = element if name == "a" else next((c for c in element if local_name(c) == "a"), element)
            label = note_label(text_of(element))
            self.result.note_refs.append(NoteRef(link.get("href", ""), label, len(self.result.blocks)))
        elif what == NOTE:
            self._note(element)
        elif what == NOTES:
            self._notes_section(element)
        elif what == MATH:
            self._math(element)

    def _note(self, element: etree._Element) -> None:
        inner = XhtmlText()
        walker = _Walker(inner, self.options, language=self.language, in_note=True, track=self.track,
                         counter=self.counter, origins=self.origins)
        walker.depth = self.depth + 1
        walker._walk_children(element)
        walker.flush()
        at = len(self.result.blocks)
        ids = tuple(dict.fromkeys(filter(None, [element.get("id"), *inner.anchors])))
        if inner.blocks:
            label = note_label(walker.first_mark) if walker.first_mark else ""
            sources: list[ParagraphSource | None] = [
                ParagraphSource(TextPlace("", block.number)) for block in inner.blocks
            ]
            self.result.notes.append(Note(ids, label, [block.text for block in inner.blocks], at, sources))
        for nested in inner.notes:  # a note inside a note is a note of its own
            self.result.notes.append(Note(nested.ids, nested.label, nested.paragraphs, at, nested.sources))
        self.result.note_refs.extend(NoteRef(ref.target, ref.label, at) for ref in inner.note_refs)
        self.result.line_numbers += inner.line_numbers
        self.result.formulas += inner.formulas

    def _notes_section(self, element: etree._Element) -> None:
        """A section of notes: each of its items is a note; its heading names it."""
        self.flush()
        for child in element:
            name = local_name(child)
            if not name or name in _SKIPPED:
                continue
            what = kind(child, name, in_note=False)
            if what in (HIDDEN, LINE_NUMBER, BACKLINK, NOTE_REF):
                continue
            if name in _HEADINGS:
                self.result.notes_title = self.result.notes_title or " ".join(text_of(child).split())
            elif what == NOTES or (name in ("ol", "ul", "div", "section") and not child.get("id")):
                self._notes_section(child)
            else:
                self._note(child)

    def _math(self, element: etree._Element) -> None:
        spoken = math_text(element)
        block = element.get("display") == "block"
        if block:
            self.flush()
        if spoken:
            self.text(f" {spoken} ")
        else:
            self.result.formulas += 1
            self._supplied(_FORMULA)
        if block:
            self.flush()

    def _plain_paragraph(self, element: etree._Element) -> None:
        self.flush()
        if element.text:
            self.text(element.text, element)
            self.flush()

    def _walk_block(self, element: etree._Element, name: str) -> None:
        self.flush()
        level = _HEADINGS.get(name)
        outer_level, outer_pre = self.level, self.preformatted
        if level:
            self.level = level
        if name == "pre":
            self.preformatted = True
        self._walk_children(element)
        self.flush()
        self.level, self.preformatted = outer_level, outer_pre

    def _walk_inline(self, element: etree._Element, name: str) -> None:
        if name == "br":
            self._supplied("\n")
            return
        if name in ("img", "image"):
            self._image(element)
            return
        if name in _CELLS and "".join(self.parts).strip():
            self._supplied(", ")  # cells of one row are read as one line, with a pause between them
        outer_link = self.in_link
        if name == "a" and element.get("href") is not None:
            self.in_link = True
        self._walk_children(element)
        self.in_link = outer_link

    def _walk_children(self, element: etree._Element) -> None:
        self.text(element.text, element)
        for child in element:
            self.walk(child)
            self.text(child.tail, child, tail=True)

    def _image(self, element: etree._Element) -> None:
        self.result.images += 1
        if self.options.image_alt_text:
            alt = (element.get("alt") or "").strip()
            if alt:
                self._supplied(f" {alt} ")


def _document_semantics(root: etree._Element) -> frozenset[str]:
    found = set(tokens(root))
    body = _find_body(root)
    found |= tokens(body)
    for child in body:
        if local_name(child) in ("section", "div", "article", "nav", "header"):
            found |= tokens(child)
    return frozenset(found)


def _find_body(root: etree._Element) -> etree._Element:
    for child in root:
        if local_name(child) == "body":
            return child
    return root


def _head_title(root: etree._Element) -> str:
    for child in root:
        if local_name(child) == "head":
            for item in child:
                if local_name(item) == "title":
                    return " ".join("".join(item.itertext()).split())
    return ""


def _tidy(text: str) -> str:
    if "\n" in text:
        text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    if "  " in text:
        text = _MULTIPLE_SPACES.sub(" ", text)
    return text.strip()

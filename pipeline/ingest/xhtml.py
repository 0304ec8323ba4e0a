"""XHTML/HTML → paragraphs of plain text, keeping where each element id falls.

A content document becomes a list of blocks (paragraphs, headings, list items, table rows, quotes),
each one string. Element ids are mapped to the block they open, so a table of contents that points
at ``chapter.xhtml#part2`` can start a chapter in the middle of a file.

What is not prose (``semantics``) is kept out of the blocks: notes are set aside with the references
that point to them, for ``notes`` to place; line and page numbers are counted and left out; math is
read from its ``alttext`` or its simple markup (``mathml``), or stood in for by "a formula" once per
run of formulas (counted); code listings are announced and skipped (``listings``); navigation lines
("Parent topic: ...") are left out and letter-spaced words joined (``furniture``).
"""

from __future__ import annotations

from lxml import etree

from pipeline.ingest.block_builder import BlockBuilder
from pipeline.ingest.blocks import (
    Block,
    ExtractOptions,
    Note,
    NoteRef,
    XhtmlText,
    document_semantics,
    find_body,
    head_title,
)
from pipeline.ingest.listings import INLINE_CODE, announcement, chinese_around, element_lines, is_listing
from pipeline.ingest.mathml import MARKUP, is_placeholder, read_formula
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
    note_label,
    text_of,
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
FORMULA = "\ue000"  # stands for a formula without text until its block's language is known
_BETWEENFORMULAS = frozenset(("", "and", "or", "和", "与", "及", "或", "，", "、"))
_LISTINGS = frozenset(("pre", "div", "figure", "code", "table"))  # elements that may hold a code listing


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
    result.title = head_title(root)
    result.semantics = document_semantics(root)
    language = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang") or options.language
    walker = _Walker(result, options, language=language, track=track)
    walker.walk(find_body(root))
    walker.flush()
    result.text_chars = sum(len(block.text) for block in result.blocks)
    return result


class _Walker(BlockBuilder):
    """Depth-first walk that cuts a document's text into blocks at block elements."""

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
        if name in _LISTINGS and self.options.code != "read" and is_listing(element, name):
            self._listing(element)
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
        self.result.left_out.add(inner.left_out)

    def _notes_section(self, element: etree._Element) -> None:
        """A section of notes: each of its items is a note; its heading names it."""
        self.flush()
        if element.get("id"):  # a table of contents may point at it: there, not at the page's top
            self.result.anchors.setdefault(element.get("id", ""), len(self.result.blocks))
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
        formula = read_formula(element, self.language)
        block = element.get("display") == "block"
        if block:
            self.flush()
        self.result.left_out.placeholders += formula.placeholder
        self.result.left_out.formulas_from_markup += formula.source == MARKUP
        if formula.text:
            self.text(f" {formula.text} ")
        else:
            self.result.formulas += 1
            if not self.joined_to_formula_run():
                self.supplied(FORMULA)
        if block:
            self.flush()

    def _listing(self, element: etree._Element) -> None:
        """A code listing: announced in the language around it, or left out; counted either way."""
        self.flush()
        lines = element_lines(element)
        self.result.left_out.code_listings += 1
        self.result.left_out.code_lines += lines
        self.result.left_out.code_mode = self.options.code
        if self.options.code == "announce":
            nearby = self.result.blocks[-1].text if self.result.blocks else ""
            self.supplied(announcement(lines, chinese_around(self.language, nearby)))
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
            self.supplied("\n")
            return
        if name in ("img", "image"):
            self._image(element)
            return
        if name in _CELLS and "".join(self.parts).strip():
            self.supplied(", ")  # cells of one row are read as one line, with a pause between them
        outer_link, outer_code = self.in_link, self.in_code
        if name == "a" and element.get("href") is not None:
            self.in_link = True
        self.in_code = outer_code or name in INLINE_CODE
        self._walk_children(element)
        self.in_link, self.in_code = outer_link, outer_code

    def _walk_children(self, element: etree._Element) -> None:
        self.text(element.text, element)
        for child in element:
            self.walk(child)
            self.text(child.tail, child, tail=True)

    def _image(self, element: etree._Element) -> None:
        self.result.images += 1
        if self.options.image_alt_text:
            alt = (element.get("alt") or "").strip()
            if alt and not is_placeholder(alt):  # 'image', 'Alternative text not available': no words
                self.supplied(f" {alt} ")



"""XHTML/HTML → paragraphs of plain text, keeping where each element id falls.

A content document becomes a list of blocks (paragraphs, headings, list items, table rows, quotes),
each one string. Element ids are mapped to the block they open, so a table of contents that points
at ``chapter.xhtml#part2`` can start a chapter in the middle of a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from pipeline.ingest.xmlsafe import local_name

EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "aside",
        "header",
        "footer",
        "main",
        "nav",
        "figure",
        "figcaption",
        "blockquote",
        "pre",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "table",
        "thead",
        "tbody",
        "tfoot",
        "tr",
        "caption",
        "hr",
        "address",
        "center",
        "body",
        "html",
        "details",
        "summary",
        "fieldset",
        "legend",
        "hgroup",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "dialog",
        "search",
    ]
)
# Never read: code, styling, ruby annotations (pinyin/furigana would double the text), embedded media,
# form controls. <title> is read separately as a hint, never as body text.
_SKIPPED = frozenset(
    [
        "script",
        "style",
        "head",
        "title",
        "template",
        "noscript",
        "rt",
        "rp",
        "object",
        "embed",
        "iframe",
        "audio",
        "video",
        "canvas",
        "svg",
        "math",
        "button",
        "input",
        "select",
        "textarea",
        "map",
        "area",
        "link",
        "meta",
        "base",
    ]
)
_CELLS = frozenset(("td", "th"))
# Semantics (epub:type / ARIA role) of elements that are not part of the read text.
_NOT_READ = frozenset(("pagebreak", "doc-pagebreak", "noteref", "doc-noteref", "doc-backlink", "backlink"))
_NOTES = frozenset(
    (
        "footnote",
        "endnote",
        "rearnote",
        "note",
        "footnotes",
        "endnotes",
        "rearnotes",
        "doc-footnote",
        "doc-endnote",
        "doc-endnotes",
        "doc-footnotes",
    )
)
_NOTE_MARK = re.compile(r"^[\[(]?(?:\d{1,3}|[*†‡§¶]+|[a-z])[\])]?$")
_MAX_DEPTH = 150  # elements nested deeper are read as plain text, keeping Python's recursion bounded
_XML_SPACE = re.compile(r"[ \t\n\r\f]+")
_SPACE_AROUND_NEWLINE = re.compile(r" *\n[ \n]*")
_MULTIPLE_SPACES = re.compile(r" {2,}")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One paragraph-like piece of text; ``level`` is 1-6 for headings, 0 otherwise."""

    text: str
    level: int = 0


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


@dataclass(frozen=True)
class ExtractOptions:
    image_alt_text: bool = False
    include_footnotes: bool = False


def extract_text(root: etree._Element, options: ExtractOptions = ExtractOptions()) -> XhtmlText:
    """Read a parsed (X)HTML document into blocks of text.

    Args:
        root: the document's root element (``<html>``), parsed by ``xmlsafe``.
        options: whether image alt text and footnotes are read.

    Returns:
        The blocks, the position of every element id, and hints about the document's role.
    """
    result = XhtmlText()
    result.title = _head_title(root)
    result.semantics = _document_semantics(root)
    body = _find_body(root)
    walker = _Walker(result, options)
    walker.walk(body)
    walker.flush()
    result.text_chars = sum(len(block.text) for block in result.blocks)
    return result


class _Walker:
    """Depth-first walk that accumulates inline text and cuts it into blocks at block elements."""

    def __init__(self, result: XhtmlText, options: ExtractOptions) -> None:
        self.result = result
        self.options = options
        self.parts: list[str] = []
        self.level = 0
        self.in_link = False
        self.preformatted = False
        self.depth = 0

    def flush(self) -> None:
        if not self.parts:
            return
        text = _tidy("".join(self.parts))
        self.parts = []
        if text:
            self.result.blocks.append(Block(text, self.level))

    def text(self, text: str | None) -> None:
        if not text:
            return
        if not self.preformatted and (
            "\n" in text or "\t" in text or "\r" in text or "  " in text or "\f" in text
        ):
            text = _XML_SPACE.sub(" ", text)
        if self.in_link:
            self.result.link_chars += len(text.strip())
        self.parts.append(text)

    def walk(self, element: etree._Element) -> None:
        name = local_name(element)
        if not name or name in _SKIPPED or self._not_read(element, name):
            return
        element_id = element.get("id") or (element.get("name") if name == "a" else None)
        if element_id:
            self.result.anchors.setdefault(element_id, len(self.result.blocks))
        if self.depth >= _MAX_DEPTH:  # absurd nesting (hostile or broken): its text, without structure
            self.text("".join(element.itertext()))
            return
        if name == "p" and not len(element) and not self.preformatted:
            self._plain_paragraph(element.text)  # most of a book: a <p> holding only text
            return
        self.depth += 1
        if name in _BLOCKS:
            self._walk_block(element, name)
        else:
            self._walk_inline(element, name)
        self.depth -= 1

    def _plain_paragraph(self, text: str | None) -> None:
        self.flush()
        if text:
            self.text(text)
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
            self.parts.append("\n")
            return
        if name in ("img", "image"):
            self._image(element)
            return
        if name in _CELLS and "".join(self.parts).strip():
            self.parts.append(", ")  # cells of one row are read as one line, with a pause between them
        outer_link = self.in_link
        if name == "a" and element.get("href") is not None:
            self.in_link = True
        self._walk_children(element)
        self.in_link = outer_link

    def _walk_children(self, element: etree._Element) -> None:
        self.text(element.text)
        for child in element:
            self.walk(child)
            self.text(child.tail)

    def _image(self, element: etree._Element) -> None:
        self.result.images += 1
        if self.options.image_alt_text:
            alt = (element.get("alt") or "").strip()
            if alt:
                self.parts.append(f" {alt} ")

    def _not_read(self, element: etree._Element, name: str) -> bool:
        if element.get("hidden") is not None or element.get("aria-hidden") == "true":
            return True
        style = element.get("style")
        if style and _HIDDEN_STYLE.search(style):
            return True
        semantics = _tokens(element)
        if semantics & _NOT_READ:
            return True
        if semantics & _NOTES and not self.options.include_footnotes:
            return True
        return _looks_like_note_mark(element, name)


def _looks_like_note_mark(element: etree._Element, name: str) -> bool:
    """A footnote reference without semantics: <sup><a href="#fn1">1</a></sup> or <a href="#n2">[2]</a>."""
    if name == "sup":
        links = [child for child in element if local_name(child) == "a"]
        if len(links) != 1 or (element.text or "").strip():
            return False
        element = links[0]
        name = "a"
    if name != "a" or "#" not in (element.get("href") or ""):
        return False
    text = "".join(element.itertext()).strip()
    return bool(_NOTE_MARK.match(text))


def _tokens(element: etree._Element) -> frozenset[str]:
    value = element.get(EPUB_TYPE)
    role = element.get("role")
    if value is None and role is None:
        return frozenset()
    return frozenset(f"{value or ''} {role or ''}".lower().split())


def _document_semantics(root: etree._Element) -> frozenset[str]:
    found = set(_tokens(root))
    body = _find_body(root)
    found |= _tokens(body)
    for child in body:
        if local_name(child) in ("section", "div", "article", "nav", "header"):
            found |= _tokens(child)
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

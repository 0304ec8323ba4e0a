"""What an element of a content document is to a listener: prose, or one of the things that are not
read where they stand.

Known by their ``epub:type`` or ARIA ``role``, by the class names that books use for them, and, where
neither says, by their shape:

- **hidden**: ``hidden``, ``aria-hidden``, ``display: none``; page breaks;
- **a note reference** (``noteref``, or a link or superscript holding only a mark such as ``1``, ``[2]``,
  ``*``, ``①``): not read inline; the note it points to is read where ``--notes`` says;
- **a note** (``footnote``, ``endnote``, ``rearnote``, class ``footnote``...) and a **notes section**
  (``footnotes``, ``endnotes``, ``rearnotes``) holding notes;
- **a back-link** from a note to its reference (``backlink``, or a link that is only ``↩`` or "back");
- **a line or page number** (class ``linenum``, ``line-number``, ``pagenum``..., ``epub:type``
  ``linenum``, or a number floated into the margin): never read;
- **math** (MathML): read by ``mathml``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lxml import etree

from pipeline.ingest.xmlsafe import local_name

EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"

HIDDEN, NOTE_REF, NOTE, NOTES, BACKLINK, LINE_NUMBER, MATH = (
    "hidden",
    "note reference",
    "note",
    "notes",
    "back-link",
    "line number",
    "math",
)
_HIDDEN_TYPES = frozenset(("pagebreak", "doc-pagebreak"))
_NOTE_REF_TYPES = frozenset(("noteref", "doc-noteref", "annoref"))
_BACKLINK_TYPES = frozenset(("doc-backlink", "backlink"))
# 'note' only as an epub:type (EPUB 2 footnotes): the ARIA role 'note' marks a boxed aside of the text.
_NOTE_TYPES = frozenset(("footnote", "endnote", "rearnote", "doc-footnote", "doc-endnote", "annotation"))
_NOTES_TYPES = frozenset(("footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"))
_LINE_NUMBER_TYPES = frozenset(("linenum", "line-number", "z3998:line-number", "linenumber"))
_NOTE_CLASSES = frozenset(("footnote", "endnote", "fnote", "footnote-text", "endnote-text"))
_NOTES_CLASSES = frozenset(("footnotes", "endnotes"))
_CONTAINERS = frozenset(("div", "section", "aside", "ol", "ul"))
_LINE_NUMBER_CLASS = re.compile(
    r"^(?:line[-_]?(?:num(?:ber)?s?|no|nr|ref)|lnum|lno|ln|linenr|margin[-_]?(?:num(?:ber)?|no)"
    r"|marg(?:in)?num"
    r"|page[-_]?(?:num(?:ber)?|no)|pagenum|pg[-_]?num|folio)$",
    re.IGNORECASE,
)
_MARGIN_STYLE = re.compile(r"float\s*:\s*right|position\s*:\s*absolute", re.IGNORECASE)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
# What a line or page number holds: '5', '120', 'xii', '[Pg 12]', 'p. 7'.
_NUMBER_TEXT = re.compile(
    r"^[\[(]?\s*(?:(?i:pg|page|p|line|l)\.?\s*)?(?:\d{1,5}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})\s*[\])]?$"
)
# A note mark: '1', '[2]', '(3)', '*', '†', 'a', '①', '注1', '[注2]', '1.'
NOTE_MARK = re.compile(
    r"^[\[(（〔【]?(?:注|註|note\s?)?(?:\d{1,3}|[*†‡§¶]+|[a-z]|[\u2460-\u2473\u2776-\u277f])[\])）〕】]?[.:]?$",
    re.IGNORECASE,
)
_BACKLINK_TEXT = re.compile(
    r"^[\s↩↑⤴⬆︎️^]*$|^(?:back|return|return to text|go back|top|返回|回到正文|返回正文)\W*$", re.IGNORECASE
)


def tokens(element: etree._Element) -> frozenset[str]:
    """The element's ``epub:type`` and ``role`` tokens, lower case."""
    value = element.get(EPUB_TYPE)
    role = element.get("role")
    if value is None and role is None:
        return frozenset()
    return frozenset(f"{value or ''} {role or ''}".lower().split())


def kind(element: etree._Element, name: str, in_note: bool) -> str:
    """What ``element`` (local name ``name``) is: one of the kinds above, or '' for prose.

    ``in_note``: the element is inside a note, where a link holding a mark points back to the
    reference (a back-link), not on to a note.
    """
    if name == "math":
        return MATH
    attributes = element.attrib
    if not attributes:  # most elements of a book: only a bare superscript can be anything but prose
        if name != "sup":
            return ""
        if in_note:  # a note's own number, opening it: '<sup>1</sup> The note.'
            own_mark = _opens_its_parent(element) and NOTE_MARK.match(text_of(element).strip())
            return BACKLINK if own_mark else ""
        return NOTE_REF if _mark_link(element, name) else ""
    if attributes.get("hidden") is not None or attributes.get("aria-hidden") == "true":
        return HIDDEN
    style = attributes.get("style")
    if style and _HIDDEN_STYLE.search(style):
        return HIDDEN
    semantics = tokens(element)
    note, notes, line_number = _class_kinds(attributes.get("class") or "")
    if semantics & _HIDDEN_TYPES:
        return HIDDEN
    in_margin = line_number or bool(style and _MARGIN_STYLE.search(style))
    if semantics & _LINE_NUMBER_TYPES or (in_margin and _numeric(element)):
        return LINE_NUMBER
    if semantics & _BACKLINK_TYPES:
        return BACKLINK
    if semantics & _NOTE_REF_TYPES:
        return BACKLINK if in_note else NOTE_REF
    if semantics & _NOTES_TYPES or (notes and name in _CONTAINERS):
        return NOTES
    if semantics & _NOTE_TYPES or note or "note" in (attributes.get(EPUB_TYPE) or "").split():
        return NOTE
    if name in ("a", "sup") and _mark_link(element, name):
        return BACKLINK if in_note else NOTE_REF
    if in_note and name == "a" and "#" in (attributes.get("href") or ""):
        return BACKLINK if _BACKLINK_TEXT.match(text_of(element)) else ""
    return ""


@lru_cache(maxsize=1024)
def _class_kinds(value: str) -> tuple[bool, bool, bool]:
    """Whether a class attribute names a note, a section of notes, or a line or page number."""
    classes = frozenset(value.lower().split())
    line_number = any(_LINE_NUMBER_CLASS.match(name) for name in classes)
    return bool(classes & _NOTE_CLASSES), bool(classes & _NOTES_CLASSES), line_number


def _opens_its_parent(element: etree._Element) -> bool:
    parent = element.getparent()
    return parent is not None and not (parent.text or "").strip() and element.getprevious() is None


def _numeric(element: etree._Element) -> bool:
    """Whether an element holds only a line or page number: '5', 'xii', '[Pg 12]'."""
    return bool(_NUMBER_TEXT.match(text_of(element).strip()))


def _mark_link(element: etree._Element, name: str) -> bool:
    """<sup><a href="#fn1">1</a></sup>, <a href="#n2">[2]</a>, or a bare <sup>3</sup> after a word."""
    if name == "sup":
        links = [child for child in element if local_name(child) == "a"]
        if not links:
            return _bare_superscript_mark(element)
        if len(links) != 1 or (element.text or "").strip():
            return False
        element = links[0]
    if "#" not in (element.get("href") or ""):
        return False
    return bool(NOTE_MARK.match(text_of(element).strip()))


def _bare_superscript_mark(element: etree._Element) -> bool:
    """A superscript mark with no link: a note mark after a word ('word³'), never a power ('10⁶',
    'x²', 'm²'), which follows a digit or a lone letter."""
    text = text_of(element).strip()
    if not NOTE_MARK.match(text) or not any(ch.isdigit() or ch in "*†‡" for ch in text):
        return False
    previous, parent = element.getprevious(), element.getparent()
    before = (previous.tail if previous is not None else parent.text if parent is not None else "") or ""
    before = before.rstrip()
    if not before or before[-1].isdigit():
        return False
    word = re.split(r"[^A-Za-z]", before)[-1]
    return len(word) != 1 or not before[-1].isalpha()


def text_of(element: etree._Element) -> str:
    return "".join(element.itertext())


def note_label(text: str) -> str:
    """'[12]' → '12', '①' → '1', '注3' → '3', '*' → '*': the mark a note is known by."""
    mark = text.strip().strip("[]()（）〔〕【】.:").strip()
    mark = re.sub(r"^(?:注|註|note\s?)", "", mark, flags=re.IGNORECASE)
    if len(mark) == 1 and ("\u2460" <= mark <= "\u2473" or "\u2776" <= mark <= "\u277f"):
        base = 0x2460 if mark <= "\u2473" else 0x2776
        return str(ord(mark) - base + 1)
    return mark

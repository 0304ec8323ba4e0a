"""Marking spoken sentences in a book's own XHTML: each sentence's words wrapped in a
``<span id>`` that a media overlay points at, without changing what a reader shows.

Where each character of a block comes from is known (``pipeline.ingest.origins``). A sentence's
first and last characters give two points in the tree; the span is put in their nearest common
ancestor, between them. An inline element that one of the points falls inside (an ``<em>`` that
the sentence starts in the middle of) is split in two at that point, both halves keeping its
attributes but its ``id`` (the first half keeps that), so both still look the same; where a point
is at the very edge of the element, it simply moves outside it. A sentence that cannot be wrapped
so (it starts inside a ruby, spans table cells, or its common ancestor cannot hold a ``<span>``)
is left unmarked, and counted.

Sentences are wrapped from the last in the document to the first: cutting a text later in the
document never moves the characters before the cut, so every origin still holds when its turn comes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lxml import etree

from pipeline.ingest.origins import Origin
from pipeline.ingest.xmlsafe import local_name

XHTML = "http://www.w3.org/1999/xhtml"
_SPAN = f"{{{XHTML}}}span"
_MARKER = "{urn:tts-jobs:readalong}marker"
# Inline elements that look the same cut in two (each half with the same attributes).
_SPLITTABLE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd label mark q s samp small span strike "
    "strong sub sup time tt u var".split()
)
# Elements whose content may not include a <span> wrapped around part of it.
_NO_SPAN_INSIDE = frozenset(
    "html head table thead tbody tfoot tr colgroup ul ol dl menu ruby rtc select optgroup datalist "
    "hgroup math svg picture video audio object map".split()
)


@dataclass(frozen=True)
class SentenceMark:
    """A sentence to mark: ``block``'s characters ``start:end`` (block text offsets)."""

    id: str
    block: int
    start: int
    end: int


def mark_sentences(origins: dict[int, list[Origin | None]], marks: Sequence[SentenceMark]) -> set[str]:
    """Wrap each of ``marks`` in a ``<span id>`` in the tree ``origins`` point into.

    Returns:
        The ids of the sentences wrapped (the others could not be; see the module's docstring).
    """
    done: set[str] = set()
    for mark in sorted(marks, key=lambda m: (m.block, m.start), reverse=True):
        points = _points(origins.get(mark.block, []), mark.start, mark.end)
        if points is not None and _wrap(points[0], points[1], mark.id):
            done.add(mark.id)
    return done


def _points(origins: list[Origin | None], start: int, end: int) -> tuple[Origin, Origin] | None:
    """The first and last characters of the span that come from the document."""
    inside = [origin for origin in origins[start:end] if origin is not None]
    if not inside:
        return None
    first, last = inside[0], inside[-1]
    return first, (last[0], last[1], last[2] + 1)  # the end point is after the last character


def _text_parent(point: Origin) -> etree._Element | None:
    element, tail, _ = point
    return element.getparent() if tail else element


def _ancestors(element: etree._Element | None) -> list[etree._Element]:
    chain = []
    while element is not None:
        chain.append(element)
        element = element.getparent()
    return chain


def _wrap(start: Origin, end: Origin, span_id: str) -> bool:
    first, last = _ancestors(_text_parent(start)), _ancestors(_text_parent(end))
    if not first or not last:
        return False
    in_last = {id(element) for element in last}
    common = next((element for element in first if id(element) in in_last), None)
    if common is None or local_name(common) in _NO_SPAN_INSIDE or not isinstance(common.tag, str):
        return False
    between = first[: first.index(common)] + last[: last.index(common)]
    if any(local_name(element) not in _SPLITTABLE for element in between):
        return False
    end_marker = _insert_marker(end)
    start_marker = _insert_marker(start)
    for marker in (start_marker, end_marker):
        while marker.getparent() is not common:
            _lift(marker)
    _enclose(start_marker, end_marker, span_id)
    return True


def _insert_marker(point: Origin) -> etree._Element:
    element, tail, index = point
    marker = etree.Element(_MARKER)
    if tail:
        text = element.tail or ""
        element.tail = text[:index] or None
        marker.tail = text[index:] or None
        element.addnext(marker)
    else:
        text = element.text or ""
        element.text = text[:index] or None
        marker.tail = text[index:] or None
        element.insert(0, marker)
    return marker


def _lift(marker: etree._Element) -> None:
    """Move ``marker`` up one level, to between the two halves of the element it was in."""
    parent = marker.getparent()
    before = bool(parent.text) or marker.getprevious() is not None
    after = bool(marker.tail) or marker.getnext() is not None
    if not before:  # at the element's very start: the marker goes before it
        parent.text = marker.tail
        marker.tail = None
        parent.remove(marker)
        parent.addprevious(marker)
        return
    if not after:  # at its very end: after it
        parent.remove(marker)
        marker.tail, parent.tail = parent.tail, None
        parent.addnext(marker)
        return
    second = etree.Element(parent.tag, {key: value for key, value in parent.attrib.items() if key != "id"})
    second.text = marker.tail
    marker.tail = None
    for sibling in list(marker.itersiblings()):
        second.append(sibling)
    second.tail, parent.tail = parent.tail, None
    parent.remove(marker)
    parent.addnext(second)
    parent.addnext(marker)


def _enclose(start: etree._Element, end: etree._Element, span_id: str) -> None:
    """Put what lies between two sibling markers into a ``<span id>``, and drop the markers."""
    span = etree.Element(_SPAN, {"id": span_id})
    span.text, start.tail = start.tail, None
    inner = []
    for sibling in start.itersiblings():
        if sibling is end:
            break
        inner.append(sibling)
    start.addnext(span)
    for element in inner:
        span.append(element)
    span.tail, end.tail = end.tail, None
    parent = start.getparent()
    parent.remove(start)
    parent.remove(end)

"""FictionBook (.fb2, and .fb2.zip holding one): sections are chapters, notes are notes.

The main body's sections nest as parts and chapters do; each section's ``<title>`` is its heading,
its epigraphs, poems (a stanza per paragraph, a verse per line), citations and subtitles are read
where they stand. The body named 'notes' (or 'comments') holds the notes that ``<a type="note">``
points to, placed by ``--notes``. The ``<description>`` gives the title, authors, language, date,
publisher, annotation, keywords, ISBN, series (``<sequence>``) and cover image. Parsed by the hardened XML
parser; the ZIP under the EPUB's caps.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace
from pathlib import Path

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook
from pipeline.ingest.identifiers import series_position
from pipeline.ingest.office import book_from_blocks, open_archive
from pipeline.ingest.options import IngestOptions, MiB
from pipeline.ingest.text_files import read_text_file
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.ingest.xmlsafe import HostileXmlError, local_name, parse_xhtml

_HREF = "{http://www.w3.org/1999/xlink}href"
_NOTES_BODIES = frozenset(("notes", "comments", "footnotes"))
_PARAGRAPHS = frozenset(("p", "subtitle", "text-author", "v"))
_CONTAINERS = frozenset(("epigraph", "cite", "annotation"))
_MAX_COVER_BYTES = 16 * MiB
_MAX_DEPTH = 6


def read_fb2(path: Path, options: IngestOptions) -> RawBook:
    """Read a FictionBook, or a ZIP holding one.

    Raises:
        BookError: unreadable, hostile (entity declarations), over the caps, or not a FictionBook.
    """
    data = _fb2_bytes(path, options)
    try:
        parsed = parse_xhtml(data)
    except HostileXmlError as exc:
        raise BookError(path, f"is hostile: {exc}", "refuse this file") from None
    except (etree.LxmlError, ValueError) as exc:
        raise BookError(path, f"is not readable XML ({' '.join(str(exc).split())[:200]})", "re-download it") from None
    root = parsed.root
    if local_name(root) != "fictionbook":
        raise BookError(path, "is not a FictionBook (its root is not <FictionBook>)", "check the file")
    warnings = [f"malformed FictionBook ({parsed.problem}); recovered what could be read"] if parsed.problem else []
    reader = _BodyReader()
    for body in _children(root, "body"):
        if (body.get("name") or "").casefold() in _NOTES_BODIES:
            reader.notes_body(body)
        else:
            reader.body(body)
    fields, cover_id = _description(root)
    book = book_from_blocks(path, "fb2", reader.blocks, fields, (reader.notes, reader.refs), warnings)
    cover, mime = _cover(root, cover_id)
    if cover:
        book.metadata = replace(book.metadata, cover=cover, cover_mime=mime)
    sequence = next(iter(root.iter("{*}sequence")), None)  # title-info's, else publish-info's
    if sequence is not None and (sequence.get("name") or "").strip():
        book.metadata = replace(book.metadata, series=" ".join(sequence.get("name", "").split()),
                                series_index=series_position(sequence.get("number") or ""))
    return book


def _fb2_bytes(path: Path, options: IngestOptions) -> bytes:
    if path.suffix.lower() != ".zip":
        return read_text_file(path, options)
    with open_archive(path, options, "zipped FictionBook") as archive:
        members = [name for name in archive.names() if name.lower().endswith(".fb2")]
        if not members:
            raise BookError(path, "holds no .fb2 file", "check that it is a zipped FictionBook")
        return archive.read(members[0])


class _BodyReader:
    """Walks the bodies into blocks (section titles as headings, by depth), notes and references."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.notes: list[Note] = []
        self.refs: list[NoteRef] = []

    def body(self, body: etree._Element) -> None:
        for child in body:
            name = local_name(child)
            if name == "section":
                self._section(child, 1)
            elif name != "title":  # the body's title is the book's, which the description gives
                self._element(child)

    def _section(self, section: etree._Element, depth: int) -> None:
        stand_in = None if any(local_name(child) == "title" for child in section) else _bold_opening(section)
        for child in section:
            name = local_name(child)
            if child is stand_in:
                self.blocks.append(Block(" ".join("".join(child.itertext()).split()), min(depth, _MAX_DEPTH)))
            elif name == "title":
                title = _title_text(child)
                if title:
                    self.blocks.append(Block(title, min(depth, _MAX_DEPTH)))
            elif name == "section":
                self._section(child, depth + 1)
            else:
                self._element(child)

    def _element(self, element: etree._Element) -> None:
        name = local_name(element)
        if name in _PARAGRAPHS:
            self._add(self._inline(element))
        elif name == "poem":
            self._poem(element)
        elif name == "table":
            for row in _children(element, "tr"):
                self._add(", ".join(text for cell in row if (text := self._inline(cell))))
        elif name in _CONTAINERS or name == "section":
            for child in element:
                self._element(child)

    def _poem(self, poem: etree._Element) -> None:
        for child in poem:
            name = local_name(child)
            if name == "stanza":
                verses = [self._inline(verse) for verse in child if local_name(verse) in ("v", "title")]
                self._add("\n".join(verse for verse in verses if verse))
            elif name == "title":
                self._add(_title_text(child))
            else:
                self._element(child)

    def _add(self, text: str) -> None:
        if text:
            self.blocks.append(Block(text))

    def _inline(self, element: etree._Element) -> str:
        """The element's text, note references taken out (and recorded) where they stand."""
        parts = [element.text or ""]
        for child in element:
            if local_name(child) == "a" and (child.get("type") == "note" or _is_note_link(child)):
                target = child.get(_HREF, "")
                self.refs.append(NoteRef(target, " ".join("".join(child.itertext()).split()).strip("[]{}()"),
                                         len(self.blocks)))
            elif local_name(child) not in ("image", "binary"):
                parts.append(self._inline(child))
            parts.append(child.tail or "")
        return " ".join("".join(parts).split())

    def notes_body(self, body: etree._Element) -> None:
        for section in body.iter():
            if local_name(section) != "section" or not section.get("id"):
                continue
            label, paragraphs = "", []
            for child in section:
                if local_name(child) == "title":
                    label = _title_text(child).strip("[]{}().")
                elif local_name(child) != "section":
                    paragraphs.extend(self._note_texts(child))
            if paragraphs:
                self.notes.append(Note((f"#{section.get('id')}",), label, paragraphs, len(self.blocks)))

    def _note_texts(self, element: etree._Element) -> list[str]:
        if local_name(element) == "poem":
            return ["\n".join(" ".join("".join(verse.itertext()).split()) for verse in element.iter()
                              if local_name(verse) == "v")]
        text = " ".join("".join(element.itertext()).split())
        return [text] if text else []


def _bold_opening(section: etree._Element) -> etree._Element | None:
    """A section's first paragraph when it is all bold or emphasis and short: the title of a section
    written without ``<title>`` (as converters such as Calibre write them)."""
    first = next((child for child in section if local_name(child) not in ("epigraph", "image", "empty-line")), None)
    if first is None or local_name(first) != "p" or (first.text or "").strip() or len(first) != 1:
        return None
    inner = first[0]
    text = " ".join("".join(inner.itertext()).split())
    if local_name(inner) in ("strong", "emphasis") and not (inner.tail or "").strip() and 0 < len(text) <= 120:
        return first
    return None


def _is_note_link(link: etree._Element) -> bool:
    """A link to an element of this book (FB2 readers treat them as notes) written as a short mark."""
    text = "".join(link.itertext()).strip()
    return link.get(_HREF, "").startswith("#") and len(text) <= 6 and any(char.isdigit() for char in text)


def _title_text(title: etree._Element) -> str:
    """A title's lines ('Chapter 1', 'The Beginning') as one: 'Chapter 1. The Beginning'."""
    lines = [" ".join("".join(line.itertext()).split()) for line in title if local_name(line) == "p"]
    lines = [line for line in lines if line] or [" ".join("".join(title.itertext()).split())]
    joined = ""
    for line in lines:
        joined = line if not joined else f"{joined}{'' if joined[-1] in '.!?:' else '.'} {line}"
    return joined


def _description(root: etree._Element) -> tuple[dict[str, str], str]:
    """The metadata fields of ``<title-info>`` and ``<publish-info>``, and the cover image's id."""
    fields: dict[str, str] = {}
    cover = ""
    info = next(iter(root.iter("{*}title-info")), None)
    if info is not None:
        authors = [_person(author) for author in _children(info, "author")]
        fields["creator"] = "; ".join(author for author in authors if author)
        for name, field in (("book-title", "title"), ("lang", "language"), ("date", "date"),
                            ("annotation", "description"), ("keywords", "keywords")):
            element = next(_children(info, name), None)
            if element is not None:
                fields[field] = " ".join("".join(element.itertext()).split()) or element.get("value", "")
        image = next(iter(info.iter("{*}image")), None)
        cover = (image.get(_HREF) or "").lstrip("#") if image is not None else ""
    publisher = next(iter(root.iter("{*}publisher")), None)
    if publisher is not None:
        fields["publisher"] = " ".join("".join(publisher.itertext()).split())
    isbn = next(iter(root.iter("{*}isbn")), None)
    if isbn is not None:
        fields["identifier"] = "isbn:" + "".join(isbn.itertext())
    return fields, cover


def _person(author: etree._Element) -> str:
    names = {local_name(part): " ".join("".join(part.itertext()).split()) for part in author}
    full = " ".join(names.get(part, "") for part in ("first-name", "middle-name", "last-name")).split()
    return " ".join(full) or names.get("nickname", "")


def _cover(root: etree._Element, cover_id: str) -> tuple[bytes | None, str]:
    if not cover_id:
        return None, ""
    for binary in _children(root, "binary"):
        if binary.get("id") == cover_id and len(binary.text or "") <= _MAX_COVER_BYTES * 4 // 3 + 4:
            try:
                return base64.b64decode(binary.text or "", validate=False), binary.get("content-type", "")
            except (binascii.Error, ValueError):
                return None, ""
    return None, ""


def _children(element: etree._Element, name: str):  # type: ignore[no-untyped-def]
    return (child for child in element if local_name(child) == name)

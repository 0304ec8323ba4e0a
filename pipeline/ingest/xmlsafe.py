"""The one way this package parses XML and XHTML: no entities, no DTDs, no network.

Every parse goes through a fresh ``lxml.etree.XMLParser(resolve_entities=False, no_network=True,
load_dtd=False, huge_tree=False)``. Documents whose DOCTYPE declares entities are refused before
parsing (billion laughs, quadratic blowup, external entities), and checked again after.
"""

from __future__ import annotations

import html.entities
import re
from dataclasses import dataclass

import lxml.html
from lxml import etree

_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ENTITY_DECL = b"<!ENTITY"
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_NAMED_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")
_XML_PREDEFINED = {b"amp", b"lt", b"gt", b"quot", b"apos"}
# HTML named entities (&nbsp; &mdash; &eacute;) are undefined in XML without the DTD we refuse to load;
# rewriting them as character references keeps their text instead of dropping it.
_HTML_ENTITY_REFS = {
    name.encode("ascii"): f"&#{codepoint};".encode("ascii")
    for name, codepoint in html.entities.name2codepoint.items()
}


class HostileXmlError(ValueError):
    """The document declares entities: refused, whatever they say."""


@dataclass(frozen=True)
class ParsedDocument:
    root: etree._Element
    problem: str  # '' when the document was well formed; else what was wrong (it was recovered)


def safe_parser(recover: bool = False) -> etree.XMLParser:
    """A parser that never resolves entities, loads DTDs or touches the network."""
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        recover=recover,
        remove_comments=True,
        remove_pis=True,
    )


def parse_xml(data: bytes) -> etree._Element:
    """Parse a package document, container or NCX strictly.

    Raises:
        HostileXmlError: the DOCTYPE declares entities.
        etree.XMLSyntaxError: the document is not well formed.
    """
    data = _as_utf8_if_utf16(data)
    if b"&#" in data:
        data = _character_references_repaired(data)
    _refuse_entity_declarations(data)
    root = etree.fromstring(data, parser=safe_parser())
    _refuse_parsed_entities(root)
    return root


def parse_xhtml(data: bytes) -> ParsedDocument:
    """Parse a content document, recovering what can be read from malformed markup.

    Raises:
        HostileXmlError: the DOCTYPE declares entities.
        ValueError: nothing at all could be read.
    """
    data = _named_entities_as_references(_as_utf8_if_utf16(data))
    _refuse_entity_declarations(data)
    try:
        root = etree.fromstring(data, parser=safe_parser())
        _refuse_parsed_entities(root)
        return ParsedDocument(root, "")
    except etree.XMLSyntaxError as exc:
        problem = f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg)
    root = _recover(data)
    _refuse_parsed_entities(root)
    return ParsedDocument(root, problem)


def parse_html(data: bytes | str) -> etree._Element:
    """Parse HTML (not XHTML) with libxml2's forgiving HTML parser; it knows no entity declarations."""
    parser = lxml.html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True, recover=True)
    if isinstance(data, bytes):
        data = _as_utf8_if_utf16(data)
        _refuse_entity_declarations(data)
    else:
        _refuse_entity_declarations(data.encode("utf-8", "replace"))
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except etree.LxmlError as exc:  # "Document is empty" and kin
        raise ValueError(str(exc) or "no markup could be read") from None
    if root is None:
        raise ValueError("no markup could be read")
    return root


def _recover(data: bytes) -> etree._Element:
    data = _valid_utf8(data)
    root = None
    try:
        root = etree.fromstring(data, parser=safe_parser(recover=True))
    except etree.LxmlError:
        root = None
    if root is not None and len(root):
        return root
    # Not XML at all (HTML saved as .xhtml): the HTML parser reads tag soup.
    return parse_html(data)


_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._-]{1,40})["']""")


def _valid_utf8(data: bytes) -> bytes:
    """Broken UTF-8 repaired (U+FFFD) before recovery: libxml2 would keep the bad bytes in tag names."""
    declared = _DECLARED_ENCODING.match(data)
    encoding = (
        declared.group(1).decode("ascii").lower().replace("-", "").replace("_", "") if declared else "utf8"
    )
    if encoding != "utf8":
        return data
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace").encode("utf-8")
    return data


def _refuse_entity_declarations(data: bytes) -> None:
    doctype = _DOCTYPE.search(data, 0, 64 * 1024)
    if doctype is None:
        return
    subset_end = data.find(b"]>", doctype.end())
    end = len(data) if subset_end < 0 else subset_end
    if data.find(_ENTITY_DECL, doctype.end(), end) >= 0:
        raise HostileXmlError("its DOCTYPE declares entities (XML entity expansion attack)")


def _refuse_parsed_entities(root: etree._Element | None) -> None:
    if root is None:
        return
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.iterentities()):
        raise HostileXmlError("its DOCTYPE declares entities (XML entity expansion attack)")


def _as_utf8_if_utf16(data: bytes) -> bytes:
    """UTF-16 documents, with or without a BOM, re-encoded as UTF-8 without their declaration."""
    head = data[:4]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="replace")
    elif len(head) >= 2 and head[0] == 0 and head[1] != 0:
        text = data.decode("utf-16-be", errors="replace")
    elif len(head) >= 2 and head[1] == 0 and head[0] != 0:
        text = data.decode("utf-16-le", errors="replace")
    else:
        return data
    return _XML_DECL.sub("", text, count=1).encode("utf-8")


_CHARACTER_REFERENCE = re.compile(rb"&#(?:[xX]([0-9A-Fa-f]{1,8})|([0-9]{1,10}));")


def _character_references_repaired(data: bytes) -> bytes:
    """References to characters XML forbids (&#xD800; &#0;) become U+FFFD: recovery would keep them as
    broken UTF-8 in the tree, which then cannot be read back."""

    def repair(match: re.Match[bytes]) -> bytes:
        value = int(match.group(1), 16) if match.group(1) else int(match.group(2))
        allowed = (
            value in (0x9, 0xA, 0xD)
            or 0x20 <= value <= 0xD7FF
            or 0xE000 <= value <= 0xFFFD
            or 0x10000 <= value <= 0x10FFFF
        )
        return match.group(0) if allowed else b"&#xFFFD;"

    return _CHARACTER_REFERENCE.sub(repair, data)


def _named_entities_as_references(data: bytes) -> bytes:
    if b"&" not in data:
        return data
    if b"&#" in data:
        data = _character_references_repaired(data)

    def replace(match: re.Match[bytes]) -> bytes:
        name = match.group(1)
        if name in _XML_PREDEFINED:
            return match.group(0)
        return _HTML_ENTITY_REFS.get(name, match.group(0))

    return _NAMED_ENTITY.sub(replace, data)


def local_name(element: etree._Element) -> str:
    """The tag without its namespace, lower-cased; '' for comments, processing instructions and garbage."""
    try:
        tag = element.tag
    except ValueError:  # UnicodeDecodeError: a recovered tag name that is not valid UTF-8
        return ""
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2].lower()

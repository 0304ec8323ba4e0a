"""What a read-along EPUB is made of before its overlays are added: the package, the content
documents with their sentences marked, and where each marked sentence is."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from lxml import etree

from pipeline.readalong.package import ACTIVE_CLASS

READALONG_DIR = "readalong"  # beside the package document: the audio, overlays and stylesheet added
STYLESHEET = (
    f".{ACTIVE_CLASS} {{ background-color: #ffe58f; color: inherit; border-radius: 0.15em; }}\n"
).encode("utf-8")
Marked = dict[tuple[int, int], tuple[str, str]]  # (chapter, sentence) -> (document, fragment id)


@dataclass
class Edition:
    opf_member: str
    package: etree._Element  # the package document, to which the overlays are added
    files: dict[str, bytes]  # every member but the mimetype, the package and what the overlays add
    marked: Marked = field(default_factory=dict)
    order: dict[str, list[str]] = field(default_factory=dict)  # document -> its fragment ids, in order
    unmarked: int = 0  # sentences with a place in the book that could not be marked

    def member(self, name: str) -> str:
        """A path of what the edition adds (``name`` under ``READALONG_DIR``, beside the package)."""
        return posixpath.join(posixpath.dirname(self.opf_member), READALONG_DIR, name)


def fragment_id(chapter: int, sentence: int) -> str:
    return f"ra-{chapter + 1}-{sentence + 1}"


def xhtml_bytes(root: etree._Element) -> bytes:
    """A content document as EPUB 3 wants it: XML, UTF-8, the HTML5 doctype."""
    return etree.tostring(root, encoding="utf-8", xml_declaration=True, doctype="<!DOCTYPE html>")

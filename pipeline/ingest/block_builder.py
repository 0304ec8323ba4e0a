"""Text gathered into blocks as a document is walked: inline pieces are joined, spaces folded, and
each block cut with its number and (when tracking) where each character came from.

Words the reader supplies are decided here, where a block's language is known: a formula without
words is stood in for once per run ("a formula", "公式"); a navigation line ("Parent topic: ...")
yields no block; letter-spaced words are joined (``furniture``).
"""

from __future__ import annotations

import re

from lxml import etree

from pipeline.ingest.blocks import Block, ExtractOptions, XhtmlText, tidy
from pipeline.ingest.furniture import is_navigation_line, join_letter_spacing
from pipeline.ingest.listings import identifier_words
from pipeline.ingest.origins import Origin, Part, block_origins

FORMULA = "\ue000"  # stands for a formula without text until its block's language is known
_XML_SPACE = re.compile(r"[ \t\n\r\f]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_BETWEEN_FORMULAS = frozenset(("", "and", "or", "和", "与", "及", "或", "，", "、"))


class BlockBuilder:
    """Inline text accumulated and cut into blocks; ``_Walker`` in ``xhtml`` walks the elements."""

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
        self.formula_only = False  # the last block was only a formula's stand-in
        self.own_text = False  # the block so far holds text of the document, not only the reader's words
        self.in_code = False  # inside inline code, whose identifiers are read as words

    def flush(self) -> None:
        """End the block being gathered: add it to the result, unless it holds nothing to read."""
        if not self.parts:
            return
        text = tidy("".join(self.parts))
        frame = tidy("".join(self.unlinked)) if self.block_link_chars else ""
        parts, sources = self.parts, self.sources
        self.parts, self.unlinked, self.sources = [], [], []
        own, self.own_text = self.own_text, False
        linked, self.block_link_chars = self.block_link_chars, 0
        word = ""
        if FORMULA in text:
            word = "公式" if _CJK.search(text) or self.language.lower().startswith("zh") else "a formula"
            if text == FORMULA and self.formula_only:
                return  # formulas displayed one after another: one stand-in for the run
            self.result.left_out.formula_runs += text.count(FORMULA)
            text = tidy(text.replace(FORMULA, f" {word} "))
        if text and is_navigation_line(text, linked):
            self.result.left_out.navigation += 1
            return
        if text:
            self.formula_only = text == word
            links = linked >= len(text.replace(" ", "")) > 0
            number = self.counter[0]
            self.counter[0] += 1
            self.result.blocks.append(Block(text, self.level, links, frame, number, supplied=not own))
            if self.track:
                self.origins[number] = block_origins(parts, sources, text, FORMULA, word)

    def text(self, text: str | None, element: etree._Element | None = None, tail: bool = False) -> None:
        """Add ``text``: ``element``'s text (or with ``tail``, its tail); None: the reader's own."""
        if not text:
            return
        if element is not None and not self.own_text and text.strip():
            self.own_text = True
        if self.track:
            self.sources.append((element, tail, text) if element is not None else None)
        if self.in_code:
            text = identifier_words(text)
        # letter-spaced words ('T h i s'): as many spaces as letters, or words parted by wider gaps
        spaced = "  " in text or "\xa0" in text or (len(text) > 6 and text.count(" ") * 4 > len(text))
        if not self.preformatted and spaced:
            text, joined = join_letter_spacing(text)
            self.result.left_out.letter_spaced += joined
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

    def supplied(self, text: str) -> None:
        """Add words or marks that the reader supplies (kept as they are: no space is folded)."""
        self.parts.append(text)
        if self.track:
            self.sources.append(None)

    def joined_to_formula_run(self) -> bool:
        """Whether only commas and 'and' stand between here and the last formula's stand-in: then
        they are dropped, and the stand-in speaks for this formula too ('a, b and c' → 'a formula')."""
        for back, part in enumerate(reversed(self.parts)):
            if part == FORMULA:
                del self.parts[len(self.parts) - back :]
                if self.track:
                    del self.sources[len(self.sources) - back :]
                return True
            if part.strip(" ,;") not in _BETWEEN_FORMULAS:
                return False
        return False

"""The first pass of normalisation: each character the voice cannot read as it stands, one at a time.

Quotes, brackets, dashes, invisible characters, full-width and compatibility forms, accents and
letters of other scripts are mapped through a per-character cache; the rest of the text is left alone.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from pipeline.text.drops import Drops, classify
from pipeline.text.marks import (
    BREAK_MARK,
    CJK_PUNCTUATION,
    CJK_RANGE,
    CUBED,
    DASH_MARK,
    ELLIPSIS,
    SEPARATOR,
    SQUARED,
)

# Characters needing no attention in the first pass: printable ASCII except quotes and brackets,
# CJK ideographs and the CJK punctuation the voice reads.
_SPECIAL = re.compile(
    rf"[^\x20\x21\x23-\x27\x2a-\x5a\x5c\x5e\x5f\x61-\x7a\x7c\x7e{CJK_RANGE}{CJK_PUNCTUATION}{SEPARATOR}]"
)
_INVISIBLE = frozenset(
    chr(code)
    for code in [
        *range(0x09),
        0x0B,
        0x0C,
        *range(0x0E, 0x20),
        0x7F,
        *range(0x80, 0xA0),
        0x00AD,
        0x034F,
        0x061C,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x180E,
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2070),
        0xFE0E,
        0xFE0F,
        0xFEFF,
        *range(0xFFF9, 0xFFFC),
    ]
)
_PUNCTUATION = {
    "\t": " ",
    "\n": f" {BREAK_MARK} ",
    "\r": f" {BREAK_MARK} ",
    "\u2028": f" {BREAK_MARK} ",
    "\u2029": f" {BREAK_MARK} ",
    # quotation marks and title marks: not words
    **dict.fromkeys('"“”„‟«»‹›〝〞〟「」『』《》〈〉＂', ""),
    # single quotes become apostrophes; lone ones are removed by ``punctuation.tidy``
    **dict.fromkeys("‘’‚‛′`´＇", "'"),
    # brackets and dashes: pauses; only a dash can join the two ends of a range
    **dict.fromkeys("()[]{}（）【】〔〕〖〗［］｛｝", f" {BREAK_MARK} "),
    **dict.fromkeys("—―‒–⸺⸻", f" {DASH_MARK} "),
    "…": f" {ELLIPSIS} ",
    "⋯": f" {ELLIPSIS} ",
    "²": SQUARED,
    "³": CUBED,
    "〇": "零",
    "−": "-",
    "‐": "-",
    "‑": "-",
    "〜": "~",
    "～": "~",
    "⁄": "/",
    "∕": "/",
    "｡": "。",
    "､": "、",
    "　": " ",
}
# Kept for the number and symbol readers, which speak them.
SPOKEN_SYMBOLS = frozenset("&+=@%×÷±§≈≠≤≥°√∞~<>$€£¥₩₹₽‰#→⟶➔➜⇒")
_FOLD_SPECIAL = {
    "ß": "ss",
    "ẞ": "SS",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "ł": "l",
    "Ł": "L",
    "đ": "d",
    "Đ": "D",
    "þ": "th",
    "Þ": "Th",
    "ð": "d",
    "Ð": "D",
    "ı": "i",
    "ħ": "h",
    "Ħ": "H",
    "ŋ": "ng",
    "Ŋ": "Ng",
    "ĸ": "k",
    "ſ": "s",
}


def basic_forms(text: str, drops: Drops) -> str:
    """Quotes, brackets, dashes, invisible characters, NFKC forms, accents and unreadable letters."""
    if not _SPECIAL.search(text):
        return text

    def replace(match: re.Match[str]) -> str:
        replacement, kind, script = basic_form(match.group(0))
        if kind:
            drops.count(kind, script)
        return replacement

    return _SPECIAL.sub(replace, text)


@lru_cache(maxsize=65_536)
def basic_form(ch: str) -> tuple[str, str, str]:
    """(replacement, kind of drop or '', script name or '') for one character needing attention."""
    if ch in _PUNCTUATION:
        return _PUNCTUATION[ch], "", ""
    if ch in _INVISIBLE:
        return "", "", ""
    if ch in SPOKEN_SYMBOLS or ch.isascii():
        return ch, "", ""
    compatible = unicodedata.normalize("NFKC", ch)
    if compatible != ch:  # full-width Ａ１, ligatures, circled numbers, ℃, ½ ...
        parts = [basic_form(part) if _SPECIAL.match(part) else (part, "", "") for part in compatible]
        kinds = [(kind, script) for _, kind, script in parts if kind]
        kind, script = kinds[0] if kinds else ("", "")
        return "".join(part for part, _, _ in parts), kind, script
    if ch in _FOLD_SPECIAL:
        return _FOLD_SPECIAL[ch], "", ""
    folded = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if folded != ch and folded.isascii() and folded.isalpha():
        return folded, "", ""
    kind, script = classify(ch)
    if kind == "script":
        return "", kind, script
    if kind == "silent" and unicodedata.category(ch)[0] == "M":
        return "", "", ""  # a combining mark: part of the letter before it
    return " ", kind if kind != "silent" else "", ""


def scan_drops(text: str, drops: Drops) -> None:
    """Count what ``normalize`` would drop from ``text`` in its first pass, without rewriting it."""
    for ch in _SPECIAL.findall(text):
        _, kind, script = basic_form(ch)
        if kind:
            drops.count(kind, script)

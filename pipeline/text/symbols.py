"""Symbols as words: & + = % × ÷ ± § ≈ ≠ ≤ ≥ ° ~ < > √ ∞ → ⇒ and the powers ² ³."""

from __future__ import annotations

import re

from pipeline.text.language import Languages
from pipeline.text.marks import CUBED, SEPARATOR, SQUARED
from pipeline.text.reading import read_match

_SYMBOL_WORDS = {  # symbol -> (English, Chinese)
    "&": ("and", "和"),
    "+": ("plus", "加"),
    "=": ("equals", "等于"),
    "@": ("at", "at"),
    "%": ("percent", "百分之"),
    "×": ("times", "乘"),
    "÷": ("divided by", "除以"),
    "±": ("plus or minus", "正负"),
    "§": ("section", "第"),
    "≈": ("approximately", "约等于"),
    "≠": ("is not equal to", "不等于"),
    "≤": ("at most", "小于等于"),
    "≥": ("at least", "大于等于"),
    "°": ("degrees", "度"),
    "~": ("about", "约"),
    "<": ("less than", "小于"),
    ">": ("greater than", "大于"),
    "√": ("square root of", "根号"),
    "∞": ("infinity", "无穷"),
    "→": ("to", "到"),  # '8.9 GB → 6.5 GB', 'A → B'
    "⟶": ("to", "到"),
    "➔": ("to", "到"),
    "➜": ("to", "到"),
    "⇒": ("gives", "得到"),
    SQUARED: ("squared", "平方"),
    CUBED: ("cubed", "立方"),
}
_SYMBOL = re.compile(f"[{re.escape(''.join(_SYMBOL_WORDS))}]")
SYMBOL_CHARACTERS = frozenset(_SYMBOL_WORDS)


def spell_symbols(text: str, languages: Languages) -> str:
    """Every symbol of ``text`` that stands for a word, as that word in its sentence's language.

    Run after the numbers are read, so that a symbol that is part of a number ('50%', '5 m²') is
    read with it.
    """
    return _SYMBOL.sub(lambda match: read_match(match, _symbol, languages), text)


def _symbol(match: re.Match[str], language: str) -> str:
    symbol = match.group(0)
    text, at = match.string, match.start()
    if symbol in "<>~":  # only between spaces ("a < b") or, for "~", before a word ("~ten" = about ten)
        before = text[at - 1] if at else ""
        after = text[at + 1] if at + 1 < len(text) else ""
        spaced = before == " " and after == " "
        about = symbol == "~" and before in ("", " ", SEPARATOR) and (after.isalpha() or after == " ")
        if not spaced and not about:
            return symbol
    english, chinese = _SYMBOL_WORDS[symbol]
    return chinese if language == "zh" else english

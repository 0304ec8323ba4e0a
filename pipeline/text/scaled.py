"""Counts written with a scale letter: '1.2B 参数', '7B parameters', '500M tokens', '32k words'.

Before a noun they count, the letter is a scale ('1.2B 参数' is 十二亿参数, 'seven billion
parameters'), never a Latin letter left in Chinese speech. Alone ('7B模型', 'a 7B model') it names
a model size and is read as written (``七B``), as people say it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from pipeline.text.numbers import amount, zh_cardinal

_SCALES = {
    "k": (10**3, "thousand"),
    "K": (10**3, "thousand"),
    "M": (10**6, "million"),
    "B": (10**9, "billion"),
}
# Nouns that make the letter before them a scale.
COUNTED = (
    r"(?:个)?(?:参数|词元|token|样本|用户|条|张|字|词|行)|(?i:parameters?|params|tokens?|words|users|samples"
    r"|examples|images|rows|sentences|documents|pages|people|downloads|views)\b"
)
SCALE_LETTERS = "".join(_SCALES)


def scaled(match: re.Match[str], language: str) -> str:
    """'1.2B' before a counted noun: 'one point two billion' (or '十二亿')."""
    digits, letter = match.group(1).replace(",", ""), match.group(2)
    factor, english = _SCALES[letter]
    if language != "zh" or _between_english_words(match):
        return f"{amount(digits, 'en')} {english}"
    try:
        value = Decimal(digits) * factor
    except InvalidOperation:
        return match.group(0)
    for unit, word in ((10**8, "亿"), (10**4, "万")):
        if value >= unit:
            return _zh_decimal(value / unit) + word
    return _zh_decimal(value)


def _between_english_words(match: re.Match[str]) -> bool:
    """'has 7B parameters' inside Chinese text: an English phrase, read in English."""
    text = match.string
    before = text[max(0, match.start() - 2) : match.start()].strip()
    after = text[match.end() : match.end() + 1]
    return before[-1:].isascii() and before[-1:].isalpha() and after.isascii() and after.isalpha()


def _zh_decimal(value: Decimal) -> str:
    if value == value.to_integral_value():
        return zh_cardinal(int(value))
    return amount(format(value.normalize(), "f"), "zh")

"""Numbers that are no date, time, sum of money or measure, as words.

Percentages, ordinals (1st), decades ('60s), fractions (1/2), ranges (10-20), codes read digit by
digit (555-123-4567, 1.2.3), negatives, numbered things (#4, No. 5), page and figure references, and
bare numbers. Each reader takes its rule's match (see ``number_rules``) and the language to speak in.
"""

from __future__ import annotations

import re

from pipeline.text.numbers import (
    amount,
    cardinal,
    digit_by_digit,
    en_cardinal,
    en_decade,
    en_ordinal,
    en_year,
    zh_cardinal,
    zh_digits,
)

_EN_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}
_REFERENCE_WORDS = {
    "pp": ("pages", "页"),
    "p": ("page", "页"),
    "fig": ("figure", "图"),
    "figs": ("figures", "图"),
    "vol": ("volume", "卷"),
    "ch": ("chapter", "章"),
    "chap": ("chapter", "章"),
    "sec": ("section", "节"),
    "eq": ("equation", "公式"),
}
_ZH_MEASURE_WORDS = frozenset(
    "个只位条本张件次天年人种名头匹辆把块份句双对岁周层座家项门杯瓶碗倍首枚间所台部封群片"
)


def percent(match: re.Match[str], language: str) -> str:
    sign, digits, mark = match.group(1), match.group(2), match.group(3)
    if language == "zh":
        return ("负" if sign else "") + ("千分之" if mark == "‰" else "百分之") + amount(digits, "zh")
    return ("minus " if sign else "") + amount(digits, "en") + (" per mille" if mark == "‰" else " percent")


def ordinal(match: re.Match[str], language: str) -> str:
    value = _int(match.group(1))
    return f"第{zh_cardinal(value)}" if language == "zh" else en_ordinal(value)


def decade(match: re.Match[str], language: str) -> str:
    value = int(match.group(1))
    if language == "zh":
        return f"{zh_digits(match.group(1)) if value >= 100 else zh_cardinal(value)}年代"
    return en_decade(value)


def fraction(match: re.Match[str], language: str) -> str:
    numerator, denominator = int(match.group(1)), int(match.group(2))
    if denominator == 0:
        return f"{cardinal(numerator, language)} {cardinal(denominator, language)}"
    if language == "zh":
        return f"{zh_cardinal(denominator)}分之{zh_cardinal(numerator)}"
    if denominator == 1:
        return f"{en_cardinal(numerator)} over one"
    singular, plural = _EN_DENOMINATORS.get(
        denominator, (en_ordinal(denominator), en_ordinal(denominator) + "s")
    )
    return f"{en_cardinal(numerator)} {singular if numerator == 1 else plural}"


def number_range(match: re.Match[str], language: str) -> str:
    """The low end of '10–20 kg' and 'to'; the high end, with its unit, is read by the later rules."""
    low, high = match.group(1), match.group(2)
    if language == "zh":
        high_end = match.end(2)
        years = len(low) == 4 and match.string[high_end : high_end + 1] == "年"  # 1990-2000年: digit by digit
        return f"{zh_digits(low) if years else amount(low, 'zh')}至"
    if len(low) == 4 and len(high) == 4 and "." not in low + high and 1100 <= _int(low) < 2100:
        return f"{en_year(_int(low))} to"
    return f"{amount(low, 'en')} to"


def hyphen_range(match: re.Match[str], language: str) -> str:
    low, high = match.group(1), match.group(2)
    if int(low) < int(high) and len(high) <= len(low):  # 1990-2000, pages 12-15
        return number_range(match, language)
    return digit_by_digit(low, language)  # 12-3: a code; each part is read on its own


def reference_word(match: re.Match[str], language: str) -> str:
    """'pp.' → 'pages', 'Fig.' → 'figure': the word before a number, which the number rule reads next."""
    english, chinese = _REFERENCE_WORDS[match.group(1).lower()]
    return chinese if language == "zh" else english


def digit_groups(match: re.Match[str], language: str) -> str:
    """Phone numbers and codes: 555-123-4567, digit by digit."""
    groups = re.findall(r"\d+", match.group(0))
    return (" " if language == "en" else "，").join(digit_by_digit(group, language) for group in groups)


def dotted(match: re.Match[str], language: str) -> str:
    """Version numbers and addresses: 1.2.3 → one point two point three."""
    parts = match.group(0).split(".")
    joiner = "点" if language == "zh" else " point "
    return joiner.join(
        cardinal(int(part), language)
        if not part.startswith("0") or part == "0"
        else digit_by_digit(part, language)
        for part in parts
    )


def negative(match: re.Match[str], language: str) -> str:
    return ("负" if language == "zh" else "minus ") + amount(match.group(1), language)


def number_sign(match: re.Match[str], language: str) -> str:
    """'#4' and 'No. 5': 'number four' (or '四号')."""
    value = match.group(1)
    return f"{amount(value, 'zh')}号" if language == "zh" else f"number {amount(value, 'en')}"


def number(match: re.Match[str], language: str) -> str:
    """A bare number; in English a four-digit one in 1100-2099 is read as a year."""
    digits = match.group(0)
    plain = digits.replace(",", "")
    if language == "en" and len(digits) == 4 and digits.isdigit() and 1100 <= int(digits) < 2100:
        return en_year(int(digits))
    if language == "zh" and plain == "2" and _zh_measure_follows(match):
        return "两"
    return amount(digits, language)


def _zh_measure_follows(match: re.Match[str]) -> bool:
    text = match.string
    following = text[match.end() : match.end() + 1]
    preceding = text[max(0, match.start() - 1) : match.start()]
    return following in _ZH_MEASURE_WORDS and preceding != "第"


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))

"""Numbers that are no date, time, sum of money or measure, as words.

Percentages, ordinals (1st), decades ('60s), fractions (1/2), ranges (10-20), codes read digit by
digit (555-123-4567, 1.2.3), negatives, numbered things (#4, No. 5), page and figure references, and
bare numbers. Each reader takes its rule's match (see ``number_rules``) and the language to speak in.
"""

from __future__ import annotations

import re

from pipeline.text.codes import in_code_context, is_code, spoken_code
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
    "c": ("circa", "约"),
    "l": ("line", "行"),
    "ll": ("lines", "行"),
    "ca": ("circa", "约"),
}
# Words right before a minus sign that only repeat it: '下降-3%' is read '下降百分之三'. A figure
# given with its sign in a sentence ('MOS下降了-0.05') keeps it: 负零点零五.
_ZH_FALLING = re.compile(r"(?:下降|降低|减少|下跌|下滑|缩减|减小|跌幅|降幅|回落|亏损)\s?$")
# Words before a number of 1000-1099 that make it a year ('in 1087'); and words that may follow one.
_YEAR_BEFORE = re.compile(
    r"(?i:\b(?:in|since|by|from|until|till|before|after|around|circa|c\.|ca\.|year|of|during|between|and|to"
    r"|early|late|mid|summer|winter|spring|autumn|fall|AD|A\.D\.)) $"
)
_ERA = re.compile(r" ?(?:AD|BC|BCE|CE|A\.D\.|B\.C\.)(?![A-Za-z])")
_YEAR_AFTER = re.compile(r"(?: [A-Za-z]+| ?$| ?[^\sA-Za-z])")
_NOT_YEAR_NEXT_WORDS = re.compile(r" (?:[a-z]+s|people|men|women|times|feet|miles|years|days|copies)\b")
# 'RTX ', 'GTX ', and the models listed after one ('RTX 3080/', 'RTX 3080 和 '); 'iPhone' is no model line
_MODEL_NAME = re.compile(
    r"(?<![A-Za-z])[A-Z]{2,}[a-z]* (?:\d{3,4}[A-Za-z]{0,2} ?(?:/|、|,|和|或|与|and |or ) ?)*$"
)
_MODEL_LOOK_BACK = 40
# Capitals written against the digits name a model or part: 'A100', 'H200', 'A10', 'XJ-900'.
_MODEL_LINE = re.compile(r"(?<![A-Za-z])[A-Z]{2,5}$")
_MODEL_LETTERS = re.compile(r"(?<![A-Za-z])[A-Z]{1,5}(?:-(?=\d{3}))?$")
_ZH_MEASURE_WORDS = frozenset(
    "个只位条本张件次天年人种名头匹辆把块份句双对岁周层座家项门杯瓶碗倍首枚间所台部封群片行段节步"
)


def percent(match: re.Match[str], language: str) -> str:
    sign, digits, mark = match.group(1), match.group(2), match.group(3)
    if language == "zh":
        return zh_minus(match, sign) + ("千分之" if mark == "‰" else "百分之") + amount(digits, "zh")
    return ("minus " if sign else "") + amount(digits, "en") + (" per mille" if mark == "‰" else " percent")


def multiple(match: re.Match[str], language: str) -> str:
    """'1.8×', '3x': 'one point eight times' (or '一点八倍')."""
    value = amount(match.group(1), language)
    return f"{value}倍" if language == "zh" else f"{value} times"


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
    if denominator == 0 or 1 < denominator <= numerator:  # 24/7, 50/50: two numbers, not a fraction
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
    """The low end of '10–20 kg' and 'to'; the high end, with its unit, is read by the later rules.

    Numbers around a dash that are no range (a code, '3–2') are left to the later rules.
    """
    low, high = match.group(1), match.group(2)
    if in_code_context(match.string, match.start()) or not _rising(low, high):
        return match.group(0)
    if language == "zh":
        high_end = match.end(2)
        after = match.string[high_end : high_end + 1]
        years = len(low) == 4 and after == "年"  # 1990-2000年: digit by digit
        percent = "百分之" if after == "%" else ""  # 40-75%: 百分之四十至百分之七十五
        return f"{percent}{zh_digits(low) if years else amount(low, 'zh')}至"
    if len(low) == 4 and len(high) in (2, 4) and "." not in low + high and 1100 <= _int(low) < 2100:
        return f"{en_year(_int(low))} to"  # 1990–2000, 1990–91
    return f"{amount(low, 'en')} to"


def _rising(low: str, high: str) -> bool:
    """Whether 'low–high' goes up, as a range does; '1990–91' abbreviates its high end."""
    try:
        low_value, high_value = float(low.replace(",", "")), float(high.replace(",", ""))
    except ValueError:
        return False
    if len(low) == 4 and len(high) == 2 and low.isdigit() and high.isdigit():
        return int(high) > int(low) % 100
    return low_value < high_value


def hyphen_range(match: re.Match[str], language: str) -> str:
    """'12-15', '64-128', '0-64', '1.3-1.8': a range; '12-3', '3-2' and codes are no range."""
    low, high = match.group(1), match.group(2)
    code = in_code_context(match.string, match.start()) or (low.startswith("0") and low[1:2].isdigit())
    if not code and _rising(low, high) and len(high.split(".")[0]) <= len(low.split(".")[0]) + 1:
        return number_range(match, language)
    if "." in low:
        return amount(low, language) + ("，" if language == "zh" else ", ")
    # '12-3', '3-2': no range; the low part, a pause, and the high part is read next
    return spoken_code([low], language) + ("，" if language == "zh" else ", ")


def reference_word(match: re.Match[str], language: str) -> str:
    """'pp.' → 'pages', 'Fig.' → 'figure': the word before a number, which the number rule reads next."""
    english, chinese = _REFERENCE_WORDS[match.group(1).lower()]
    return chinese if language == "zh" else english


def digit_groups(match: re.Match[str], language: str) -> str:
    """Phone numbers, ISBNs and other codes: 555-123-4567, digit by digit, group by group."""
    return spoken_code(re.findall(r"\d+", match.group(0)), language)


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


def scientific(match: re.Match[str], language: str) -> str:
    """'3e-4' → 'three times ten to the minus four' (or '三乘十的负四次方')."""
    mantissa, exponent = match.group(1), int(match.group(2))
    if language == "zh":
        return f"{amount(mantissa, 'zh')}乘十的{zh_cardinal(exponent)}次方"
    return f"{amount(mantissa, 'en')} times ten to the {en_cardinal(exponent)}"


def negative(match: re.Match[str], language: str) -> str:
    if language == "zh":
        return zh_minus(match, "-") + amount(match.group(1), "zh")
    return "minus " + amount(match.group(1), language)


def zh_minus(match: re.Match[str], sign: str) -> str:
    """'负' for a minus sign, unless the words before it already say that the number falls."""
    if not sign:
        return ""
    text = match.string
    return "" if _ZH_FALLING.search(text, max(0, match.start() - 4), match.start()) else "负"


def number_sign(match: re.Match[str], language: str) -> str:
    """'#4' and 'No. 5': 'number four' (or '四号'); 'Serial No. 4417': 'number four four one seven'."""
    value = match.group(1)
    if value.isdigit() and in_code_context(match.string, match.start()):
        return ("编号" if language == "zh" else "number ") + spoken_code([value], language)
    return f"{amount(value, 'zh')}号" if language == "zh" else f"number {amount(value, 'en')}"


def number(match: re.Match[str], language: str) -> str:
    """A bare number; in English a four-digit one in 1100-2099 is read as a year, and one in
    1000-1099 too where the words around it make it one ('in 1087'). A code is read digit by digit."""
    digits = match.group(0)
    plain = digits.replace(",", "")
    if language == "en" and len(digits) == 4 and digits.isdigit() and _model_line(match):
        return en_year(int(digits))  # 'RTX3080': thirty eighty, as the card is named
    if digits.isdigit() and is_code(match.string, match.start(), digits):
        return spoken_code([digits], language)
    if language == "zh" and len(digits) >= 2 and digits.isdigit() and _model_letters(match):
        return spoken_code([digits], language)  # 'A100': A一零零, as the card is named
    if len(digits) == 4 and digits.isdigit() and _after_model_name(match):
        # 'RTX 4090': forty ninety, as a model is named (a code, digit by digit, in Chinese)
        return en_year(int(digits)) if language == "en" else spoken_code([digits], language)
    if language == "en" and len(digits) == 4 and digits.isdigit() and _year(match, int(digits)):
        return en_year(int(digits))
    if language == "zh" and plain == "2" and _zh_measure_follows(match):
        return "两"
    return amount(digits, language)


def _after_model_name(match: re.Match[str]) -> bool:
    return bool(_MODEL_NAME.search(match.string, max(0, match.start() - _MODEL_LOOK_BACK), match.start()))


def _model_line(match: re.Match[str]) -> bool:
    """Two capitals or more written against four digits: a model line and its number ('GTX1650')."""
    return bool(_MODEL_LINE.search(match.string, max(0, match.start() - 6), match.start()))


def _model_letters(match: re.Match[str]) -> bool:
    return bool(_MODEL_LETTERS.search(match.string, max(0, match.start() - 7), match.start()))


def _year(match: re.Match[str], value: int) -> bool:
    if 1100 <= value < 2100:
        return True
    if not 1000 <= value < 1100:
        return False
    text, start, end = match.string, match.start(), match.end()
    if _ERA.match(text, end):
        return True  # 1066 AD
    return bool(
        _YEAR_BEFORE.search(text, max(0, start - 8), start)
        and _YEAR_AFTER.match(text, end)
        and not _NOT_YEAR_NEXT_WORDS.match(text, end)
    )


def _zh_measure_follows(match: re.Match[str]) -> bool:
    text = match.string
    following = text[match.end() : match.end() + 1]
    preceding = text[max(0, match.start() - 1) : match.start()]
    return following in _ZH_MEASURE_WORDS and preceding != "第"


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))

"""Numbers, dates, times, money, percentages, units, ordinals, Roman numerals and symbols → words.

Each is read in the language of the text around it: a Chinese character next to it (or, failing
that, the paragraph being mostly Chinese) makes it Chinese, an English letter English.

Numbers: one scan finds each run of digits; the rules that can start there (at a currency sign, a
minus, a month name or the digit itself, and allow what follows the digits) are tried from the most
specific (an ISO date) to the most general (a bare integer), and the first that reads it wins.
Roman numerals are read only where they are surely numbers (``spell_roman_numerals``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from pipeline.text import numbers as num
from pipeline.text.normalize import CUBED as _CUBED
from pipeline.text.normalize import DASH_MARK as _DASH_MARK
from pipeline.text.normalize import ELLIPSIS as _ELLIPSIS
from pipeline.text.normalize import SEPARATOR as _SEPARATOR
from pipeline.text.normalize import SQUARED as _SQUARED

_CJK_OR_CJK_PUNCT = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")
_DIGITS = "0123456789"
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_MONTH_BY_PREFIX = {name[:3].lower(): number for number, name in enumerate(_MONTHS, start=1)}
_MONTH_NAME = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_ZH_MEASURE_WORDS = frozenset(
    "个只位条本张件次天年人种名头匹辆把块份句双对岁周层座家项门杯瓶碗倍首枚间所台部封群片"
)

Handler = Callable[["Parts", str], str]
DefaultLanguage = Callable[[str, int], str]  # (text, position) -> the paragraph's language there


class Parts:
    """One rule's match inside the combined pattern, with groups numbered as in the rule's own pattern."""

    __slots__ = ("match", "offset", "string")

    def __init__(self, match: re.Match[str], offset: int) -> None:
        self.match = match
        self.offset = offset
        self.string = match.string

    def group(self, index: int = 0) -> str:
        return self.match.group(self.offset + index)

    def start(self) -> int:
        return self.match.start(self.offset)

    def end(self) -> int:
        return self.match.end(self.offset)


def spell_out(
    text: str, default: str | DefaultLanguage, forced: str = "", present: frozenset[str] | None = None
) -> str:
    """Every number and speakable symbol in ``text`` as words (Roman numerals: ``spell_roman_numerals``).

    Args:
        text: text after ``normalize.basic_forms``: NFKC forms, dashes and brackets as pause marks;
            possibly several paragraphs joined by ``normalize.SEPARATOR``.
        default: the paragraph's language (or a function of the position giving it), used where the
            neighbours of a number say nothing.
        forced: 'zh' or 'en' to read everything in one language.
        present: the text's unusual characters (``normalize.present_characters``), if known.
    """
    if isinstance(default, str):
        language = default
        default = lambda _text, _position: language
    present = present if present is not None else frozenset(text)
    if not present.isdisjoint(_DIGITS):
        text = _spell_numbers(text, default, forced)
    if not present.isdisjoint(_SYMBOL_CHARACTERS):
        text = _SYMBOL.sub(lambda match: _read(Parts(match, 0), _symbol, default, forced), text)
    return text


def _spell_numbers(text: str, default: DefaultLanguage, forced: str) -> str:
    """Read every run of digits with the first rule that matches at, or just before, the run.

    Rules are tried only where they can start (a currency sign, a minus, a month name, the digit
    itself), so a paragraph costs one scan for digits plus a few anchored matches per number.
    """
    pieces: list[str] = []
    done = 0
    for digits in _DIGIT_RUN.finditer(text):
        while digits.start() >= done:  # not yet read as part of an earlier number (a date, a range...)
            found = _first_reading(text, digits.start(), digits.end(), done, default, forced)
            if found is None:
                break
            start, end, spoken = found
            pieces.append(text[done:start])
            pieces.append(spoken)
            done = end  # a word before the number ("pp.") ends before its digits: read them next
    pieces.append(text[done:])
    return "".join(pieces)


def _first_reading(
    text: str, digit: int, digits_end: int, done: int, default: DefaultLanguage, forced: str
) -> tuple[int, int, str] | None:
    for start in _candidate_starts(text, digit, done):
        if start == digit:
            following = text[digits_end : digits_end + 3].lstrip(" ")[:1]
            rules = _digit_rules_followed_by(following)
        else:
            rules = _RULES_BY_FIRST_CHARACTER.get(text[start], ())
        for rule in rules:
            match = rule.pattern.match(text, start)
            if match is None or match.end() <= digit and rule.name != "reference":
                continue
            spoken = _read(Parts(match, 0), rule.read, default, forced)
            if spoken != match.group(0):
                return start, match.end(), spoken
    return None


def _candidate_starts(text: str, digit: int, done: int) -> list[int]:
    """Where a number's reading may begin: its previous word ('March', 'No.', 'US$'), sign, or itself."""
    starts: list[int] = []
    before = digit - 1
    if before >= done and text[before] == " ":
        before -= 1
    if before >= done and text[before] in _PREFIX_SIGNS:
        if before - 2 >= done and text[before - 2 : before] in ("US", "HK"):
            starts.append(before - 2)
        starts.append(before)
    elif before >= done and (text[before].isalpha() or text[before] == "."):
        # the word ends at `before`; it starts after a space, a paragraph separator, or where reading resumed
        word_start = max(text.rfind(" ", done, before), text.rfind(_SEPARATOR, done, before)) + 1 or done
        word_start = max(word_start, done)
        word = text[word_start : before + 1].rstrip(".")
        if word in _WORDS_BEFORE_NUMBERS or word[:3].lower() in _MONTH_BY_PREFIX and word.istitle():
            starts.append(word_start)
    if digit - 1 >= done and text[digit - 1] in "-'#" and (digit - 1) not in starts:
        starts.append(digit - 1)
    starts.append(digit)
    return starts


def _read(parts: Parts, handler: Handler, default: DefaultLanguage, forced: str) -> str:
    language = forced or _language_at(parts, default)
    spoken = handler(parts, language)
    if spoken == parts.group(0):
        return spoken
    return _padded(spoken, parts.string, parts.start(), parts.end())


def _padded(spoken: str, text: str, start: int, end: int) -> str:
    """Spaces around spoken words only where a letter or digit would otherwise touch them."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    if before.isalnum() and (before.isascii() or spoken[:1].isascii()):
        spoken = " " + spoken
    if after.isalnum() and (after.isascii() or spoken[-1:].isascii()):
        spoken += " "
    return spoken


def _language_at(match: Parts, default: DefaultLanguage) -> str:
    """The language of a number's neighbours: the next visible character, else the previous one."""
    text = match.string
    after = text[match.end() : match.end() + 3].lstrip(" ")
    before = text[max(0, match.start() - 3) : match.start()].rstrip(" ")
    for ch in (after[:1], before[-1:]):
        if not ch:
            continue
        if _CJK_OR_CJK_PUNCT.match(ch):
            return "zh"
        if ch.isascii() and ch.isalpha():
            return "en"
    return default(text, match.start())


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))


def _cardinal(value: int, language: str) -> str:
    return num.zh_cardinal(value) if language == "zh" else num.en_cardinal(value)


def _amount(digits: str, language: str) -> str:
    """'1,234.5' → words; integers with a leading zero and very long ones digit by digit."""
    integer, _, fraction = digits.replace(",", "").partition(".")
    if not fraction and (len(integer) > 1 and integer.startswith("0") or len(integer) > 18):
        return num.zh_digits(integer) if language == "zh" else num.en_digits(integer)
    if language == "zh":
        return num.zh_decimal(integer, fraction)
    return num.en_decimal(integer, fraction)


# --- dates and times ---------------------------------------------------------------------------------


def _date(year: int | None, month: int, day: int, language: str) -> str:
    if language == "zh":
        spoken = f"{num.zh_digits(str(year))}年" if year is not None else ""
        return spoken + f"{num.zh_cardinal(month)}月{num.zh_cardinal(day)}日"
    spoken = f"{_MONTHS[month - 1]} {num.en_ordinal(day)}"
    return spoken + (f", {num.en_year(year)}" if year is not None else "")


def _valid_date(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def _iso_date(match: Parts, language: str) -> str:
    year, month, day = int(match.group(1)), int(match.group(2)), int(match.group(3))
    return _date(year, month, day, language) if _valid_date(month, day) else match.group(0)


def _slash_date(match: Parts, language: str) -> str:
    first, second, year_digits = int(match.group(1)), int(match.group(2)), int(match.group(3))
    year = year_digits + (2000 if year_digits < 50 else 1900) if len(match.group(3)) == 2 else year_digits
    month, day = (first, second) if first <= 12 else (second, first)  # US order unless impossible
    return _date(year, month, day, language) if _valid_date(month, day) else match.group(0)


def _zh_decade(match: Parts, language: str) -> str:
    digits = match.group(1)
    return f"{num.zh_digits(digits) if len(digits) == 4 else num.zh_cardinal(int(digits))}年代"


def _zh_year(match: Parts, language: str) -> str:
    return f"{num.zh_digits(match.group(1))}年"


def _month_day(match: Parts, language: str) -> str:
    month = _MONTH_BY_PREFIX[match.group(1)[:3].lower()]
    day = int(match.group(2))
    return f"{_MONTHS[month - 1]} {num.en_ordinal(day)}" if _valid_date(month, day) else match.group(0)


def _day_month(match: Parts, language: str) -> str:
    day = int(match.group(1))
    month = _MONTH_BY_PREFIX[match.group(3)[:3].lower()]
    return f"the {num.en_ordinal(day)} of {_MONTHS[month - 1]}" if _valid_date(month, day) else match.group(0)


def _time(match: Parts, language: str) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3)) if match.group(3) else 0
    meridiem = (match.group(4) or "").replace(".", "").strip().upper()
    if language == "zh":
        prefix = {"AM": "上午", "PM": "下午"}.get(meridiem, "")
        spoken = f"{prefix}{num.zh_cardinal(hour)}点"
        if minute:
            spoken += f"{'零' if minute < 10 else ''}{num.zh_cardinal(minute)}分"
        return spoken + (f"{num.zh_cardinal(second)}秒" if second else "")
    if minute == 0:
        spoken = num.en_cardinal(hour) + ("" if meridiem else " o'clock")
    elif minute < 10:
        spoken = f"{num.en_cardinal(hour)} oh {num.en_cardinal(minute)}"
    else:
        spoken = f"{num.en_cardinal(hour)} {num.en_cardinal(minute)}"
    if second:
        spoken += f" and {num.en_cardinal(second)} seconds"
    return spoken + (f" {' '.join(meridiem)}" if meridiem else "")


def _hour_meridiem(match: Parts, language: str) -> str:
    hour = int(match.group(1))
    meridiem = match.group(2).upper() + "M"
    if language == "zh":
        return f"{'上午' if meridiem == 'AM' else '下午'}{num.zh_cardinal(hour)}点"
    return f"{num.en_cardinal(hour)} {' '.join(meridiem)}"


# --- money, percentages, units -----------------------------------------------------------------------

_CURRENCIES = {  # symbol or code -> (English singular, plural, minor unit singular, plural, Chinese)
    "$": ("dollar", "dollars", "cent", "cents", "美元"),
    "US$": ("US dollar", "US dollars", "cent", "cents", "美元"),
    "USD": ("US dollar", "US dollars", "cent", "cents", "美元"),
    "HK$": ("Hong Kong dollar", "Hong Kong dollars", "cent", "cents", "港元"),
    "€": ("euro", "euros", "cent", "cents", "欧元"),
    "EUR": ("euro", "euros", "cent", "cents", "欧元"),
    "£": ("pound", "pounds", "penny", "pence", "英镑"),
    "GBP": ("pound", "pounds", "penny", "pence", "英镑"),
    "¥": ("yen", "yen", "", "", "元"),
    "JPY": ("yen", "yen", "", "", "日元"),
    "CNY": ("yuan", "yuan", "", "", "元"),
    "RMB": ("yuan", "yuan", "", "", "元"),
    "₩": ("won", "won", "", "", "韩元"),
    "₹": ("rupee", "rupees", "", "", "卢比"),
    "₽": ("ruble", "rubles", "", "", "卢布"),
}
_SCALE_WORDS = {
    "k": (1, "thousand", "千"),
    "thousand": (1, "thousand", "千"),
    "m": (2, "million", "百万"),
    "million": (2, "million", "百万"),
    "bn": (3, "billion", "十亿"),
    "b": (3, "billion", "十亿"),
    "billion": (3, "billion", "十亿"),
    "trillion": (4, "trillion", "万亿"),
    "万": (0, "ten thousand", "万"),
    "亿": (0, "hundred million", "亿"),
}


def _money(match: Parts, language: str) -> str:
    symbol = (match.group(1) or "") + match.group(2)
    symbol = symbol if symbol in _CURRENCIES else match.group(2)
    return _money_words(symbol, match.group(3), match.group(4), language)


def _money_code(match: Parts, language: str) -> str:
    return _money_words(match.group(2).upper(), match.group(1), None, language)


def _money_words(symbol: str, digits: str, scale: str | None, language: str) -> str:
    singular, plural, minor, minors, chinese = _CURRENCIES[symbol]
    if symbol == "¥" and language == "en":
        pass
    elif symbol == "¥":
        chinese = "元"
    scale_entry = _SCALE_WORDS.get(scale.lower() if scale and scale.isascii() else scale or "")
    if language == "zh":
        scale_word = scale_entry[2] if scale_entry else ""
        return f"{_amount(digits, 'zh')}{scale_word}{chinese}"
    if scale_entry:
        return f"{_amount(digits, 'en')} {scale_entry[1]} {plural}"
    integer, _, fraction = digits.replace(",", "").partition(".")
    whole = int(integer or 0)
    if minor and len(fraction) == 2:
        cents = int(fraction)
        spoken = f"{num.en_cardinal(whole)} {singular if whole == 1 else plural}"
        if cents:
            spoken += f" and {num.en_cardinal(cents)} {minor if cents == 1 else minors}"
        return spoken
    unit = singular if digits == "1" else plural
    return f"{_amount(digits, 'en')} {unit}"


def _percent(match: Parts, language: str) -> str:
    sign, digits, mark = match.group(1), match.group(2), match.group(3)
    if language == "zh":
        return ("负" if sign else "") + ("千分之" if mark == "‰" else "百分之") + _amount(digits, "zh")
    return ("minus " if sign else "") + _amount(digits, "en") + (" per mille" if mark == "‰" else " percent")


_UNITS = {  # unit -> (English singular, plural, Chinese)
    "km": ("kilometer", "kilometers", "公里"),
    "m": ("meter", "meters", "米"),
    "cm": ("centimeter", "centimeters", "厘米"),
    "mm": ("millimeter", "millimeters", "毫米"),
    "µm": ("micrometer", "micrometers", "微米"),
    "μm": ("micrometer", "micrometers", "微米"),
    "nm": ("nanometer", "nanometers", "纳米"),
    "kg": ("kilogram", "kilograms", "公斤"),
    "g": ("gram", "grams", "克"),
    "mg": ("milligram", "milligrams", "毫克"),
    "L": ("liter", "liters", "升"),
    "ml": ("milliliter", "milliliters", "毫升"),
    "mL": ("milliliter", "milliliters", "毫升"),
    "km/h": ("kilometer per hour", "kilometers per hour", "公里每小时"),
    "m/s": ("meter per second", "meters per second", "米每秒"),
    "mph": ("mile per hour", "miles per hour", "英里每小时"),
    "°C": ("degree Celsius", "degrees Celsius", "摄氏度"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit", "华氏度"),
    "°": ("degree", "degrees", "度"),
    "KB": ("kilobyte", "kilobytes", "千字节"),
    "kB": ("kilobyte", "kilobytes", "千字节"),
    "MB": ("megabyte", "megabytes", "兆字节"),
    "GB": ("gigabyte", "gigabytes", "吉字节"),
    "TB": ("terabyte", "terabytes", "太字节"),
    "Hz": ("hertz", "hertz", "赫兹"),
    "kHz": ("kilohertz", "kilohertz", "千赫"),
    "MHz": ("megahertz", "megahertz", "兆赫"),
    "GHz": ("gigahertz", "gigahertz", "吉赫"),
    "W": ("watt", "watts", "瓦"),
    "kW": ("kilowatt", "kilowatts", "千瓦"),
    "kWh": ("kilowatt hour", "kilowatt hours", "千瓦时"),
    "V": ("volt", "volts", "伏"),
    "mAh": ("milliamp hour", "milliamp hours", "毫安时"),
    "ms": ("millisecond", "milliseconds", "毫秒"),
    "min": ("minute", "minutes", "分钟"),
    "h": ("hour", "hours", "小时"),
    "hr": ("hour", "hours", "小时"),
    "hrs": ("hour", "hours", "小时"),
    "lb": ("pound", "pounds", "磅"),
    "lbs": ("pound", "pounds", "磅"),
    "oz": ("ounce", "ounces", "盎司"),
    "ft": ("foot", "feet", "英尺"),
    "mi": ("mile", "miles", "英里"),
    "yd": ("yard", "yards", "码"),
}


def _unit(match: Parts, language: str) -> str:
    sign, digits, unit, power = match.group(1), match.group(2), match.group(3), match.group(4) or ""
    singular, plural, chinese = _UNITS[unit]
    if language == "zh":
        prefix = {_SQUARED: "平方", _CUBED: "立方"}.get(power, "")
        return f"{'负' if sign else ''}{_amount(digits, 'zh')}{prefix}{chinese}"
    prefix = {_SQUARED: "square ", _CUBED: "cubic "}.get(power, "")
    return (
        f"{'minus ' if sign else ''}{_amount(digits, 'en')} {prefix}{singular if digits == '1' else plural}"
    )


# --- ordinals, decades, fractions, ranges, plain numbers ------------------------------------------


def _ordinal(match: Parts, language: str) -> str:
    value = _int(match.group(1))
    return f"第{num.zh_cardinal(value)}" if language == "zh" else num.en_ordinal(value)


def _decade(match: Parts, language: str) -> str:
    value = int(match.group(1))
    if language == "zh":
        return f"{num.zh_digits(match.group(1)) if value >= 100 else num.zh_cardinal(value)}年代"
    return num.en_decade(value)


_EN_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _fraction(match: Parts, language: str) -> str:
    numerator, denominator = int(match.group(1)), int(match.group(2))
    if denominator == 0:
        return f"{_cardinal(numerator, language)} {_cardinal(denominator, language)}"
    if language == "zh":
        return f"{num.zh_cardinal(denominator)}分之{num.zh_cardinal(numerator)}"
    if denominator == 1:
        return f"{num.en_cardinal(numerator)} over one"
    singular, plural = _EN_DENOMINATORS.get(
        denominator, (num.en_ordinal(denominator), num.en_ordinal(denominator) + "s")
    )
    return f"{num.en_cardinal(numerator)} {singular if numerator == 1 else plural}"


def _range(match: Parts, language: str) -> str:
    """The low end of '10–20 kg' and 'to'; the high end, with its unit, is read by the later rules."""
    low, high = match.group(1), match.group(2)
    if language == "zh":
        high_end = match.match.end(match.offset + 2)
        years = (
            len(low) == 4 and match.string[high_end : high_end + 1] == "年"
        )  # 1990-2000年: years, digit by digit
        return f"{num.zh_digits(low) if years else _amount(low, 'zh')}至"
    if len(low) == 4 and len(high) == 4 and "." not in low + high and 1100 <= _int(low) < 2100:
        return f"{num.en_year(_int(low))} to"
    return f"{_amount(low, 'en')} to"


def _hyphen_range(match: Parts, language: str) -> str:
    low, high = match.group(1), match.group(2)
    if int(low) < int(high) and len(high) <= len(low):  # 1990-2000, pages 12-15
        return _range(match, language)
    return _digits(low, language)  # 12-3: a code; each part is read on its own


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


def _reference_word(match: Parts, language: str) -> str:
    english, chinese = _REFERENCE_WORDS[match.group(1).lower()]
    return chinese if language == "zh" else english


def _digits(digits: str, language: str) -> str:
    return num.zh_digits(digits) if language == "zh" else num.en_digits(digits)


def _digit_groups(match: Parts, language: str) -> str:
    """Phone numbers and codes: 555-123-4567, digit by digit."""
    groups = re.findall(r"\d+", match.group(0))
    return (" " if language == "en" else "，").join(_digits(group, language) for group in groups)


def _dotted(match: Parts, language: str) -> str:
    """Version numbers and addresses: 1.2.3 → one point two point three."""
    parts = match.group(0).split(".")
    joiner = "点" if language == "zh" else " point "
    return joiner.join(
        _cardinal(int(part), language) if not part.startswith("0") or part == "0" else _digits(part, language)
        for part in parts
    )


def _negative(match: Parts, language: str) -> str:
    return ("负" if language == "zh" else "minus ") + _amount(match.group(1), language)


def _number_sign(match: Parts, language: str) -> str:
    value = match.group(1)
    return f"{_amount(value, 'zh')}号" if language == "zh" else f"number {_amount(value, 'en')}"


def _number(match: Parts, language: str) -> str:
    digits = match.group(0)
    plain = digits.replace(",", "")
    if language == "en" and len(digits) == 4 and digits.isdigit() and 1100 <= int(digits) < 2100:
        return num.en_year(int(digits))
    if language == "zh" and plain == "2" and _zh_measure_follows(match):
        return "两"
    return _amount(digits, language)


def _zh_measure_follows(match: Parts) -> bool:
    text = match.string
    following = text[match.end() : match.end() + 1]
    preceding = text[max(0, match.start() - 1) : match.start()]
    return following in _ZH_MEASURE_WORDS and preceding != "第"


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_NOT_IN_WORD = r"(?<![A-Za-z0-9_.])"  # not \b: a Chinese character counts as a word character
_UNIT_NAMES = "|".join(sorted((re.escape(unit) for unit in _UNITS), key=len, reverse=True))
# (name, pattern, reader), most specific first: at one position the first rule that matches reads it.
_NUMBER_RULES: tuple[tuple[str, str, Handler], ...] = (
    ("iso_date", r"(?<![\d.])(\d{4})-(\d{1,2})-(\d{1,2})(?!\.?\d)", _iso_date),
    ("ymd_date", r"(?<![\d./])(\d{4})[/.](\d{1,2})[/.](\d{1,2})(?![\d/])(?!\.\d)", _iso_date),
    ("slash_date", r"(?<![\d./])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])(?!\.\d)", _slash_date),
    ("zh_decade", r"(?<![\d.])(\d0|\d{3}0)\s?年代", _zh_decade),
    ("zh_year", r"(?<![\d.])(\d{2}|\d{4})\s?年", _zh_year),
    ("month_day", rf"\b({_MONTH_NAME})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![:\d])", _month_day),
    ("day_month", rf"(?<![\d.])(\d{{1,2}})(st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_NAME})\b", _day_month),
    (
        "time",
        r"(?<![\d:.])([01]?\d|2[0-4]):([0-5]\d)(?::([0-5]\d))?(?![\d:])(\s?[AaPp]\.?[Mm]\.?(?![A-Za-z]))?",
        _time,
    ),
    ("hour", r"(?<![\d.])(\d{1,2})\s?([AaPp])\.?[Mm]\.?(?![A-Za-z])", _hour_meridiem),
    (
        "money",
        (
            rf"(US|HK)?([$€£¥₩₹₽])\s?({_NUM})(?:\s?(thousand|million|billion|trillion|bn|[kKmMbB]|万|亿)"
            rf"(?![A-Za-z]))?"
        ),
        _money,
    ),
    ("money_code", rf"({_NUM})\s?(USD|EUR|GBP|CNY|RMB|JPY)\b", _money_code),
    ("percent", rf"{_NOT_IN_WORD}(-?)({_NUM})\s?(%|‰)", _percent),
    ("ordinal", r"\b(\d+)(?i:st|nd|rd|th)\b", _ordinal),
    ("decade", r"(?<![\d.])'?(\d0|\d{3}0)'?s\b", _decade),
    ("range", rf"(?<![\d.])({_NUM})\s*(?:{_DASH_MARK}|~)\s*(?=({_NUM})(?!\.?\d))", _range),
    (
        "digit_groups",
        r"(?<![\d-])\d{2,4}(?:-\d{2,4}){2,}(?![\d-])|(?<![\d-])\d{3}-\d{4}(?![\d-])",
        _digit_groups,
    ),
    ("hyphen_range", r"(?<![\d-])(\d{1,4})-(?=(\d{1,4})(?![\d-]))", _hyphen_range),
    ("unit", rf"{_NOT_IN_WORD}(-?)({_NUM})\s?({_UNIT_NAMES})([{_SQUARED}{_CUBED}])?(?![A-Za-z0-9])", _unit),
    ("fraction", r"(?<![\d/.])(\d{1,3})/(\d{1,3})(?![\d/])", _fraction),
    ("dotted", r"(?<![\d.])\d+(?:\.\d+){2,}(?!\.?\d)", _dotted),
    ("negative", rf"{_NOT_IN_WORD}-({_NUM})", _negative),
    ("number_sign", rf"(?:#|\bNo\.\s?|\bNos\.\s?)({_NUM})", _number_sign),
    (
        "reference",
        r"\b(pp|p|Fig|fig|Figs|figs|Vol|vol|Ch|ch|Chap|chap|Sec|sec|Eq|eq)\.\s?(?=\d)",
        _reference_word,
    ),
    ("number", _NUM, _number),
)
_DIGIT_RUN = re.compile(r"[0-9]+")
_PREFIX_SIGNS = frozenset("$€£¥₩₹₽#-'")
_WORDS_BEFORE_NUMBERS = frozenset(
    (
        "No",
        "Nos",
        "pp",
        "p",
        "Fig",
        "fig",
        "Figs",
        "figs",
        "Vol",
        "vol",
        "Ch",
        "ch",
        "Chap",
        "chap",
        "Sec",
        "sec",
        "Eq",
        "eq",
    )
)


@dataclass(frozen=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    read: Handler
    first: str  # the characters a match can begin with ("0" stands for any digit)


_FIRST_CHARACTERS = {  # rules that may begin before the digits, and with what ("reference" ends before them)
    "month_day": "JFMASOND",
    "money": "UH$€£¥₩₹₽",
    "percent": "-0",
    "decade": "'0",
    "unit": "-0",
    "negative": "-",
    "number_sign": "#N",
    "reference": "pPfFvVcCsSeE",
}
_UNIT_STARTS = "".join(sorted({unit[0] for unit in _UNITS})) + _SQUARED + _CUBED
# The first visible character that may follow a number's first run of digits, per rule that starts at
# a digit: "1984 they" can be no date, time, unit or money, so only the plain reading is tried.
# Rules not listed accept anything.
_FOLLOWING_CHARACTERS: dict[str, str] = {
    "iso_date": "-",
    "ymd_date": "/.",
    "slash_date": "/",
    "zh_decade": "年",
    "zh_year": "年",
    "day_month": "sndrto" + "JFMASOND",
    "time": ":",
    "hour": "aApP",
    "money_code": ",.UEGCRJ",
    "percent": ",.%‰",
    "ordinal": "sndrtSNDRT",
    "decade": "s'",
    "range": ",.~" + _DASH_MARK,
    "digit_groups": "-",
    "hyphen_range": "-",
    "unit": ",." + _UNIT_STARTS,
    "fraction": "/",
    "dotted": ".",
}
_RULES = tuple(
    _Rule(name, re.compile(pattern), read, _FIRST_CHARACTERS.get(name, "0"))
    for name, pattern, read in _NUMBER_RULES
)


@lru_cache(maxsize=256)
def _digit_rules_followed_by(character: str) -> tuple[_Rule, ...]:
    """The rules that start at a digit and allow ``character`` first after its run of digits (spaces
    skipped; '' at the end of the text)."""
    return tuple(
        rule
        for rule in _RULES
        if "0" in rule.first
        and (
            rule.name not in _FOLLOWING_CHARACTERS
            or (character and character in _FOLLOWING_CHARACTERS[rule.name])
        )
    )


_RULES_BY_FIRST_CHARACTER: dict[str, tuple[_Rule, ...]] = {
    character: tuple(rule for rule in _RULES if character in rule.first)
    for character in {ch for rule in _RULES for ch in rule.first}
}


# --- Roman numerals ---------------------------------------------------------------------------------
# Read only where they are surely numbers: after a chapter word ("Chapter IV", "Part ii"), after a
# regnal name ("Henry VIII" → "Henry the eighth") and alone at the head of a paragraph ("XII. The Storm").
# The pronoun "I" is never one, except right after a chapter word.

_CHAPTER_WORDS = frozenset(
    [
        "Chapter",
        "CHAPTER",
        "Part",
        "PART",
        "Book",
        "BOOK",
        "Volume",
        "VOLUME",
        "Vol",
        "Act",
        "ACT",
        "Scene",
        "SCENE",
        "Section",
        "SECTION",
        "Canto",
        "CANTO",
        "Letter",
        "LETTER",
        "Appendix",
        "APPENDIX",
    ]
)
_REGNAL_NAMES = frozenset(
    [
        "King",
        "Queen",
        "Pope",
        "Emperor",
        "Tsar",
        "Czar",
        "Henry",
        "Louis",
        "Charles",
        "George",
        "Edward",
        "William",
        "Elizabeth",
        "James",
        "Richard",
        "Pius",
        "Benedict",
        "Gregory",
        "Leo",
        "Napoleon",
        "Peter",
        "Catherine",
        "Frederick",
        "Philip",
        "Alexander",
        "Nicholas",
        "Ivan",
        "John",
        "Paul",
        "Innocent",
        "Clement",
        "Ludwig",
        "Alfonso",
        "Ferdinand",
    ]
)
_NUMERAL_END = r"(?![A-Za-z0-9'’])"
# A numeral after a space, found in one pass led by the literal space; the word before it decides.
_SPACED_NUMERAL = re.compile(rf" ([IVXLCDM]{{1,8}}|[ivxlcdm]{{1,8}}){_NUMERAL_END}")
_OPENING_PUNCTUATION = " ,.!?;:，。！？、；：" + _DASH_MARK + _ELLIPSIS
_PARAGRAPH_OPENING_NUMERAL = re.compile(
    rf"{_SEPARATOR}[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}"
)
_TEXT_OPENING_NUMERAL = re.compile(rf"[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}")


def spell_roman_numerals(text: str, default: str | DefaultLanguage, forced: str = "") -> str:
    """Roman numerals that are surely numbers, as words; run after everything unspeakable is gone, so
    that what follows a numeral is what the listener will hear follow it."""
    if isinstance(default, str):
        language = default
        default = lambda _text, _position: language
    pieces: list[str] = []
    done = 0
    for match in _SPACED_NUMERAL.finditer(text):
        spoken = _numeral_after_word(match, default, forced)
        if spoken:
            pieces.append(text[done : match.start(1)])
            pieces.append(spoken)
            done = match.end()
    if pieces:
        pieces.append(text[done:])
        text = "".join(pieces)
    if _SEPARATOR in text:  # a literal-led pattern: one fast scan
        text = _PARAGRAPH_OPENING_NUMERAL.sub(lambda m: _opening_numeral(m, default, forced), text)
    opening = _TEXT_OPENING_NUMERAL.match(text)
    if opening:
        text = _opening_numeral(opening, default, forced) + text[opening.end() :]
    return text


def _numeral_after_word(match: re.Match[str], default: DefaultLanguage, forced: str) -> str:
    """'Chapter IV' → 'four', 'Part ii' → 'two', 'Henry VIII' → 'the eighth'; '' when not a number."""
    text, space = match.string, match.start()
    numeral = match.group(1)
    previous = text[text.rfind(" ", max(0, space - 12), space) + 1 : space].rpartition(_SEPARATOR)[2]
    previous = previous.rstrip(".")
    chapter = previous in _CHAPTER_WORDS
    regnal = previous in _REGNAL_NAMES and numeral.isupper() and (len(numeral) > 1 or numeral in "VX")
    if not chapter and not regnal:
        return ""
    value = num.roman_value(numeral)
    if value is None:
        return ""
    language = forced or default(text, space)
    if chapter:
        spoken = _cardinal(value, language)
    elif language == "en":
        spoken = f"the {num.en_ordinal(value)}"
    else:
        return ""
    return _padded(spoken, text, match.start(1), match.end())


def _opening_numeral(match: re.Match[str], default: DefaultLanguage, forced: str) -> str:
    """'XII. The Storm' → 'twelve. The Storm'; a paragraph that is only 'IV' → 'four'."""
    text, numeral_start, end = match.string, match.start(1), match.end(1)
    value = num.roman_value(match.group(1))
    rest = text[end : end + 8].lstrip(" " + _DASH_MARK + _ELLIPSIS)  # trailing pauses vanish later
    closes = not rest or rest[0] in (".", ":", _SEPARATOR)
    single_letter = end - numeral_start == 1 and text[numeral_start] not in "VX"  # "C" alone: likely a letter
    if value is None or not closes or single_letter or (value == 1 and rest[:1] not in (".", ":")):
        return match.group(0)
    spoken = _cardinal(value, forced or default(text, numeral_start))
    return text[match.start() : numeral_start] + _padded(spoken, text, numeral_start, end)


# --- symbols ----------------------------------------------------------------------------------------

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
    _SQUARED: ("squared", "平方"),
    _CUBED: ("cubed", "立方"),
}
_SYMBOL = re.compile(f"[{re.escape(''.join(_SYMBOL_WORDS))}]")
_SYMBOL_CHARACTERS = frozenset(_SYMBOL_WORDS)


def _symbol(match: Parts, language: str) -> str:
    symbol = match.group(0)
    text, at = match.string, match.start()
    if symbol in "<>~":  # only between spaces ("a < b") or, for "~", before a word ("~ten" = about ten)
        before = text[at - 1] if at else ""
        after = text[at + 1] if at + 1 < len(text) else ""
        spaced = before == " " and after == " "
        about = symbol == "~" and before in ("", " ", _SEPARATOR) and (after.isalpha() or after == " ")
        if not spaced and not about:
            return symbol
    english, chinese = _SYMBOL_WORDS[symbol]
    return chinese if language == "zh" else english

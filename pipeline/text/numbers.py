"""Numbers as words, in English and Chinese.

ChatTTS reads digits unreliably (and normalisation drops what the voice cannot read), so every
number is spelled out. English words are joined with spaces, never hyphens, because a hyphen is not
in the voice's alphabet.
"""

from __future__ import annotations

_EN_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_EN_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_EN_SCALES = (
    (10**15, "quadrillion"),
    (10**12, "trillion"),
    (10**9, "billion"),
    (10**6, "million"),
    (10**3, "thousand"),
)
_EN_ORDINAL_WORDS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_ZH_DIGITS = "零一二三四五六七八九"
_ZH_SMALL_UNITS = ("", "十", "百", "千")
_ZH_GROUP_UNITS = ("", "万", "亿", "万亿", "亿亿")
MAX_SPOKEN = 10**18 - 1  # beyond this a number is read digit by digit


def en_cardinal(number: int) -> str:
    """1234 → 'one thousand two hundred thirty four'."""
    if number < 0:
        return "minus " + en_cardinal(-number)
    if number > MAX_SPOKEN:
        return en_digits(str(number))
    if number < 20:
        return _EN_ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _EN_TENS[tens] + (f" {_EN_ONES[ones]}" if ones else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        return f"{_EN_ONES[hundreds]} hundred" + (f" {en_cardinal(rest)}" if rest else "")
    for scale, name in _EN_SCALES:
        if number >= scale:
            high, rest = divmod(number, scale)
            return f"{en_cardinal(high)} {name}" + (f" {en_cardinal(rest)}" if rest else "")
    raise AssertionError("unreachable")


def en_ordinal(number: int) -> str:
    """23 → 'twenty third'."""
    words = en_cardinal(number).split(" ")
    last = words[-1]
    if last in _EN_ORDINAL_WORDS:
        words[-1] = _EN_ORDINAL_WORDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def en_year(year: int) -> str:
    """1949 → 'nineteen forty nine', 2005 → 'two thousand five', 2024 → 'twenty twenty four'."""
    if year < 1000 or year > 9999 or year % 1000 == 0 or 2000 <= year < 2010:
        return en_cardinal(year)
    high, low = divmod(year, 100)
    if low == 0:
        return f"{en_cardinal(high)} hundred"
    if low < 10:
        return f"{en_cardinal(high)} oh {_EN_ONES[low]}"
    return f"{en_cardinal(high)} {en_cardinal(low)}"


def en_decade(decade: int) -> str:
    """1960 → 'nineteen sixties', 60 → 'sixties', 2000 → 'two thousands'."""
    words = (en_year(decade) if decade >= 100 else en_cardinal(decade)).split(" ")
    last = words[-1]
    words[-1] = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return " ".join(words)


def en_digits(digits: str) -> str:
    """'007' → 'zero zero seven'."""
    return " ".join(_EN_ONES[int(digit)] for digit in digits if digit.isdigit())


def en_decimal(integer: str, fraction: str) -> str:
    """('3', '14') → 'three point one four'."""
    whole = en_cardinal(int(integer)) if integer else "zero"
    return f"{whole} point {en_digits(fraction)}" if fraction else whole


def zh_cardinal(number: int) -> str:
    """12345 → '一万二千三百四十五', 10 → '十', 1005 → '一千零五'."""
    if number < 0:
        return "负" + zh_cardinal(-number)
    if number == 0:
        return "零"
    if number > MAX_SPOKEN:
        return zh_digits(str(number))
    groups: list[int] = []
    while number:
        number, group = divmod(number, 10_000)
        groups.append(group)
    words = ""
    zero_pending = False
    for position in range(len(groups) - 1, -1, -1):
        group = groups[position]
        if group == 0:
            zero_pending = bool(words)
            continue
        if words and (zero_pending or group < 1000):
            words += "零"
        words += _zh_under_ten_thousand(group) + _ZH_GROUP_UNITS[position]
        zero_pending = False
    return words[1:] if words.startswith("一十") else words


def _zh_under_ten_thousand(number: int) -> str:
    words = ""
    zero_pending = False
    for place in range(3, -1, -1):
        digit = number // 10**place % 10
        if digit == 0:
            zero_pending = bool(words)
            continue
        if zero_pending:
            words += "零"
            zero_pending = False
        words += _ZH_DIGITS[digit] + _ZH_SMALL_UNITS[place]
    return words


def zh_digits(digits: str) -> str:
    """'2024' → '二零二四'."""
    return "".join(_ZH_DIGITS[int(digit)] for digit in digits if digit.isdigit())


def zh_decimal(integer: str, fraction: str) -> str:
    """('3', '14') → '三点一四'."""
    whole = zh_cardinal(int(integer)) if integer else "零"
    return f"{whole}点{zh_digits(fraction)}" if fraction else whole


def cardinal(value: int, language: str) -> str:
    """``value`` in words, in Chinese for 'zh', else in English."""
    return zh_cardinal(value) if language == "zh" else en_cardinal(value)


def digit_by_digit(digits: str, language: str) -> str:
    """'007' → 'zero zero seven' (or '零零七')."""
    return zh_digits(digits) if language == "zh" else en_digits(digits)


def amount(digits: str, language: str) -> str:
    """'1,234.5' → words; integers with a leading zero and very long ones digit by digit."""
    integer, _, fraction = digits.replace(",", "").partition(".")
    if not fraction and (len(integer) > 1 and integer.startswith("0") or len(integer) > 18):
        return digit_by_digit(integer, language)
    if language == "zh":
        return zh_decimal(integer, fraction)
    return en_decimal(integer, fraction)

"""Dates as words: ISO and slashed dates, month names with a day, Chinese years and decades.

Each reader takes its rule's match (see ``number_rules``) and the language to speak in, and returns
the match itself where it turns out not to be a date (a 13th month, a 32nd day).
"""

from __future__ import annotations

import re

from pipeline.text.numbers import en_ordinal, en_year, zh_cardinal, zh_digits

MONTHS = [
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
MONTH_BY_PREFIX = {name[:3].lower(): number for number, name in enumerate(MONTHS, start=1)}
MONTH_NAME = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)


def iso_date(match: re.Match[str], language: str) -> str:
    """2024-03-05 and 2024/3/5: year, month, day."""
    year, month, day = int(match.group(1)), int(match.group(2)), int(match.group(3))
    return _date(year, month, day, language) if _valid_date(month, day) else match.group(0)


def slash_date(match: re.Match[str], language: str) -> str:
    """12/25/2023 (month first unless that is impossible) and 25/12/23."""
    first, second, year_digits = int(match.group(1)), int(match.group(2)), int(match.group(3))
    year = year_digits + (2000 if year_digits < 50 else 1900) if len(match.group(3)) == 2 else year_digits
    month, day = (first, second) if first <= 12 else (second, first)  # US order unless impossible
    return _date(year, month, day, language) if _valid_date(month, day) else match.group(0)


def zh_decade(match: re.Match[str], language: str) -> str:
    digits = match.group(1)
    return f"{zh_digits(digits) if len(digits) == 4 else zh_cardinal(int(digits))}年代"


def zh_year(match: re.Match[str], language: str) -> str:
    return f"{zh_digits(match.group(1))}年"


def month_day(match: re.Match[str], language: str) -> str:
    """'March 3rd' → 'March third'."""
    month = MONTH_BY_PREFIX[match.group(1)[:3].lower()]
    day = int(match.group(2))
    return f"{MONTHS[month - 1]} {en_ordinal(day)}" if _valid_date(month, day) else match.group(0)


# Words that already stand where 'the' would ('The 3rd of May', 'on the 3rd', 'his 21st May party')
_DETERMINER_BEFORE = re.compile(
    r"\b(?:the|a|an|this|that|these|those|my|your|his|her|its|our|their|whose|each|every|which|what)\s+$",
    re.IGNORECASE)


def day_month(match: re.Match[str], language: str) -> str:
    """'5 of March' → 'the fifth of March'; 'the 5th of March' → 'the fifth of March' (no second
    'the' after an article or determiner)."""
    day = int(match.group(1))
    month = MONTH_BY_PREFIX[match.group(3)[:3].lower()]
    if not _valid_date(month, day):
        return match.group(0)
    determined = _DETERMINER_BEFORE.search(match.string[max(0, match.start() - 12):match.start()])
    return f"{'' if determined else 'the '}{en_ordinal(day)} of {MONTHS[month - 1]}"


def _date(year: int | None, month: int, day: int, language: str) -> str:
    if language == "zh":
        spoken = f"{zh_digits(str(year))}年" if year is not None else ""
        return spoken + f"{zh_cardinal(month)}月{zh_cardinal(day)}日"
    spoken = f"{MONTHS[month - 1]} {en_ordinal(day)}"
    return spoken + (f", {en_year(year)}" if year is not None else "")


def _valid_date(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31

"""Finding the numbers of a text and reading each with the first rule that fits it.

One scan finds each run of digits; the rules that can start there (at a currency sign, a minus, a
month name or the digit itself, and that allow what follows the digits) are tried from the most
specific (an ISO date) to the most general (a bare integer), and the first that reads it wins. So a
paragraph costs one scan for digits plus a few anchored matches per number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pipeline.text.citations import shortened_range, verse
from pipeline.text.codes import international_phone
from pipeline.text.dates import (
    MONTH_BY_PREFIX,
    MONTH_NAME,
    day_month,
    iso_date,
    month_day,
    slash_date,
    zh_decade,
    zh_year,
)
from pipeline.text.language import Languages
from pipeline.text.marks import BREAK_MARK, CUBED, DASH_MARK, SEPARATOR, SQUARED
from pipeline.text.money import CURRENCY_SIGNS, money, money_code
from pipeline.text.number_forms import (
    decade,
    digit_groups,
    dotted,
    fraction,
    hyphen_range,
    multiple,
    negative,
    number,
    number_range,
    number_sign,
    ordinal,
    percent,
    reference_word,
    scientific,
)
from pipeline.text.number_lists import number_list, ratio
from pipeline.text.reading import Reader, read_match
from pipeline.text.scaled import COUNTED, SCALE_LETTERS, scaled
from pipeline.text.times import clock_time, hour_with_meridiem
from pipeline.text.units import UNITS, per_second, unit

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_NOT_IN_WORD = r"(?<![A-Za-z0-9_.])"  # not \b: a Chinese character counts as a word character
# Abbreviations read as a word before the number that follows them ("pp. 12" → "pages twelve").
_REFERENCES = ("pp", "p", "Fig", "fig", "Figs", "figs", "Vol", "vol", "Ch", "ch", "Chap", "chap", "Sec", "sec",
               "Eq", "eq", "c", "ca", "l", "ll")  # fmt: skip
_UNIT_NAMES = "|".join(sorted((re.escape(name) for name in UNITS), key=len, reverse=True))
# A dash or tilde after a measure, before the next one: '60%~80%', '10℃–20℃', '$5–$10'.
_RANGE_TAIL = rf"(?P<to>\s*(?:~|{DASH_MARK})\s*(?=[-+]?[{CURRENCY_SIGNS}]?\d))?"


def _ranged(reader: Reader) -> Reader:
    """``reader``, followed by 'to' (or '至') where its match ends at the dash of a range."""

    def read(match: re.Match[str], language: str) -> str:
        spoken = reader(match, language)
        if spoken == match.group(0) or not match.group("to"):
            return spoken
        return spoken + ("至" if language == "zh" else " to ")

    return read

# (name, pattern, reader), most specific first: at one position the first rule that matches reads it.
_NUMBER_RULES: tuple[tuple[str, str, Reader], ...] = (
    ("iso_date", r"(?<![\d.])(\d{4})-(\d{1,2})-(\d{1,2})(?!\.?\d)", iso_date),
    ("ymd_date", r"(?<![\d./])(\d{4})[/.](\d{1,2})[/.](\d{1,2})(?![\d/])(?!\.\d)", iso_date),
    ("slash_date", r"(?<![\d./])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])(?!\.\d)", slash_date),
    ("zh_decade", r"(?<![\d.])(\d0|\d{3}0)\s?年代", zh_decade),
    ("zh_year", r"(?<![\d.])(\d{2}|\d{4})\s?年", zh_year),
    ("number_list", r"(?<![\d.,])\d+(?:\.\d+)?(?:,\d+(?:\.\d+)?)+(?!\d)", number_list),
    ("month_day", rf"\b({MONTH_NAME})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![:\d])", month_day),
    ("day_month", rf"(?<![\d.])(\d{{1,2}})(st|nd|rd|th)?\s+(?:of\s+)?({MONTH_NAME})\b", day_month),
    ("verse", rf"(?<![\d:.])(\d{{1,3}}):(\d{{1,3}})(?:[-{DASH_MARK}](\d{{1,3}}))?(?![\d:])", verse),
    ("ratio", r"(?<![\d:.])(\d{1,3}):(\d{1,3})(?::(\d{1,3}))?(?![\d:])", ratio),
    (
        "time",
        r"(?<![\d:.])([01]?\d|2[0-4]):([0-5]\d)(?::([0-5]\d))?(?![\d:])(\s?[AaPp]\.?[Mm]\.?(?![A-Za-z]))?",
        clock_time,
    ),
    ("hour", r"(?<![\d.])(\d{1,2})\s?([AaPp])\.?[Mm]\.?(?![A-Za-z])", hour_with_meridiem),
    (
        "money",
        (
            rf"(US|HK)?([{CURRENCY_SIGNS}])\s?({_NUM})"
            rf"(?:\s?(thousand|million|billion|trillion|bn|[kKmMbB]|万|亿)(?![A-Za-z]))?{_RANGE_TAIL}"
        ),
        _ranged(money),
    ),
    ("money_code", rf"({_NUM})\s?(USD|EUR|GBP|CNY|RMB|JPY)\b", money_code),
    ("percent", rf"{_NOT_IN_WORD}(-?)({_NUM})\s?(%|‰){_RANGE_TAIL}", _ranged(percent)),
    ("multiple", rf"{_NOT_IN_WORD}({_NUM})\s?[×xX](?![A-Za-z0-9×])", multiple),
    ("scaled", rf"{_NOT_IN_WORD}({_NUM})([{SCALE_LETTERS}]) ?(?={COUNTED})", scaled),
    ("scientific", r"(?<![\d.])(\d+(?:\.\d+)?)[eE]([-+]?\d{1,3})(?![A-Za-z0-9])", scientific),
    ("phone", r"\+\d{1,3}(?:[ -]\d{1,4}){2,}(?![\d])", international_phone),
    ("ordinal", r"\b(\d+)(?i:st|nd|rd|th)\b", ordinal),
    ("decade", r"(?<![\d.])'?(\d0|\d{3}0)'?s\b", decade),
    (
        "range",
        rf"(?<![\d.])((?:{_NOT_IN_WORD}-)?(?:{_NUM}))\s*(?:{DASH_MARK}|~)\s*(?=({_NUM})(?!\.?\d))",
        number_range,
    ),
    (
        "digit_groups",
        (
            r"(?<![\d-])(?:(?:0\d{1,4}|\d{3})-\d{3,4} \d{4}|\d{1,6}(?:-\d{1,6}){2,}|\d{3}-\d{4}"
            r"|0\d{1,4}-\d{3,}|\d{1,6}-\d{5,}|\d{5,}-\d{1,6})(?![\d-])"
        ),
        digit_groups,
    ),
    ("shortened_range", r"(?<![\dA-Za-z.-])(\d{2,4})-(\d{1,3})(?![\d-]|\.\d)", shortened_range),
    (
        "hyphen_range",
        r"(?<![\dA-Za-z.-])(\d{1,4}(?:\.\d+)?)-(?=(\d{1,4}(?:\.\d+)?)(?![\d-]|\.\d))",
        hyphen_range,
    ),
    (
        "unit",
        # an abbreviation's period goes with it where the sentence goes on: '5 oz. of flour'
        rf"{_NOT_IN_WORD}(-?)({_NUM})\s?({_UNIT_NAMES})([{SQUARED}{CUBED}])?(?![A-Za-z0-9])"
        rf"(?:\.(?=[,;:]| ?[a-z0-9]))?{_RANGE_TAIL}",
        _ranged(unit),
    ),
    ("per_second", rf"{_NOT_IN_WORD}({_NUM})\s?([A-Za-z]+)/s(?![A-Za-z0-9])", per_second),
    ("fraction", r"(?<![\d/.])(\d{1,3})/(\d{1,3})(?![\d/])", fraction),
    ("dotted", r"(?<![\d.])\d+(?:\.\d+){2,}(?!\.?\d)", dotted),
    ("negative", rf"{_NOT_IN_WORD}-({_NUM})", negative),
    ("number_sign", rf"(?:#|\bNo\.\s?|\bNos\.\s?)({_NUM})", number_sign),
    ("reference", rf"\b({'|'.join(_REFERENCES)})\.\s?(?=\d)", reference_word),
    ("number", _NUM, number),
)
_DIGIT_RUN = re.compile(r"[0-9]+")
_PREFIX_SIGNS = frozenset(CURRENCY_SIGNS + "#-'+")
_WORDS_BEFORE_NUMBERS = frozenset(("No", "Nos", *_REFERENCES))


@dataclass(frozen=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    read: Reader
    first: str  # the characters a match can begin with ("0" stands for any digit)


_FIRST_CHARACTERS = {  # rules that may begin before the digits, and with what ("reference" ends before them)
    "month_day": "JFMASOND",
    "money": "UH" + CURRENCY_SIGNS,
    "percent": "-0",
    "phone": "+",
    "range": "-0",
    "decade": "'0",
    "unit": "-0",
    "negative": "-",
    "number_sign": "#N",
    "reference": "pPfFvVcCsSeEl",
}
_UNIT_STARTS = "".join(sorted({name[0] for name in UNITS})) + SQUARED + CUBED
# The first visible character that may follow a number's first run of digits, per rule that starts at
# a digit: "1984 they" can be no date, time, unit or money, so only the plain reading is tried.
# Rules not listed accept anything.
_FOLLOWING_CHARACTERS: dict[str, str] = {
    "iso_date": "-",
    "ymd_date": "/.",
    "slash_date": "/",
    "zh_decade": "年",
    "zh_year": "年",
    "number_list": ",.",
    "day_month": "sndrto" + "JFMASOND",
    "time": ":",
    "ratio": ":",
    "verse": ":",
    "shortened_range": "-",
    "hour": "aApP",
    "money_code": ",.UEGCRJ",
    "percent": ",.%‰",
    "multiple": ",.×xX",
    "scaled": ",." + SCALE_LETTERS,
    "scientific": "eE",
    "ordinal": "sndrtSNDRT",
    "decade": "s'",
    "range": ",.~" + DASH_MARK,
    "digit_groups": "-",
    "hyphen_range": "-.",
    "unit": ",." + _UNIT_STARTS,
    "fraction": "/",
    "dotted": ".",
}
_RULES = tuple(
    _Rule(name, re.compile(pattern), read, _FIRST_CHARACTERS.get(name, "0"))
    for name, pattern, read in _NUMBER_RULES
)
_RULES_BY_FIRST_CHARACTER: dict[str, tuple[_Rule, ...]] = {
    character: tuple(rule for rule in _RULES if character in rule.first)
    for character in {ch for rule in _RULES for ch in rule.first}
}


def spell_numbers(text: str, languages: Languages) -> str:
    """Every number of ``text`` as words, each in the language of the sentence around it.

    Args:
        text: text after the first pass of normalisation (``characters.basic_forms``): NFKC forms,
            dashes and brackets as pause marks; possibly several paragraphs joined by ``SEPARATOR``.
        languages: the language of the sentence around each number.
    """
    pieces: list[str] = []
    done = 0
    read_to = -1  # where the last number read ends
    for digits in _DIGIT_RUN.finditer(text):
        while digits.start() >= done:  # not yet read as part of an earlier number (a date, a range...)
            found = _first_reading(text, digits.start(), digits.end(), done, languages)
            if found is None:
                break
            start, end, spoken = found
            gap = text[done:start]
            # two numbers parted by a space alone ('GTX 1650 4GB', '75% 1.3×') are never heard as one
            pieces.append(f" {BREAK_MARK} " if gap and gap.strip(" /-") == "" and done == read_to else gap)
            pieces.append(spoken)
            done = end  # a word before the number ("pp.") ends before its digits: read them next
            read_to = end if text[start].isdigit() or text[start] in "-+" else -1
    pieces.append(text[done:])
    return "".join(pieces)


def _first_reading(
    text: str, digit: int, digits_end: int, done: int, languages: Languages
) -> tuple[int, int, str] | None:
    """(start, end, words) of the first rule that reads the number whose digits start at ``digit``."""
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
            spoken = read_match(match, rule.read, languages)
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
        word_start = max(text.rfind(" ", done, before), text.rfind(SEPARATOR, done, before)) + 1 or done
        word_start = max(word_start, done)
        word = text[word_start : before + 1].rstrip(".")
        if word in _WORDS_BEFORE_NUMBERS or word[:3].lower() in MONTH_BY_PREFIX and word.istitle():
            starts.append(word_start)
    if digit - 1 >= done and text[digit - 1] in "-'#" and (digit - 1) not in starts:
        starts.append(digit - 1)
    starts.append(digit)
    return starts


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

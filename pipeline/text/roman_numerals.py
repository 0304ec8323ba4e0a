"""Roman numerals as words, where they are surely numbers.

That is after a chapter word ("Chapter IV", "Part ii"), after a regnal name ("Henry VIII" → "Henry
the eighth") and alone at the head of a paragraph ("XII. The Storm"). The pronoun "I" is never one,
except right after a chapter word.
"""

from __future__ import annotations

import re

from pipeline.text.language import DefaultLanguage
from pipeline.text.marks import DASH_MARK, ELLIPSIS, SEPARATOR
from pipeline.text.numbers import cardinal, en_ordinal
from pipeline.text.reading import padded

_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
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
_OPENING_PUNCTUATION = " ,.!?;:，。！？、；：" + DASH_MARK + ELLIPSIS
_PARAGRAPH_OPENING_NUMERAL = re.compile(
    rf"{SEPARATOR}[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}"
)
_TEXT_OPENING_NUMERAL = re.compile(rf"[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}")


def spell_roman_numerals(text: str, default: DefaultLanguage, forced: str = "") -> str:
    """Roman numerals that are surely numbers, as words; run after everything unspeakable is gone, so
    that what follows a numeral is what the listener will hear follow it."""
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
    if SEPARATOR in text:  # a literal-led pattern: one fast scan
        text = _PARAGRAPH_OPENING_NUMERAL.sub(lambda m: _opening_numeral(m, default, forced), text)
    opening = _TEXT_OPENING_NUMERAL.match(text)
    if opening:
        text = _opening_numeral(opening, default, forced) + text[opening.end() :]
    return text


def _numeral_after_word(match: re.Match[str], default: DefaultLanguage, forced: str) -> str:
    """'Chapter IV' → 'four', 'Part ii' → 'two', 'Henry VIII' → 'the eighth'; '' when not a number."""
    text, space = match.string, match.start()
    numeral = match.group(1)
    previous = text[text.rfind(" ", max(0, space - 12), space) + 1 : space].rpartition(SEPARATOR)[2]
    previous = previous.rstrip(".")
    chapter = previous in _CHAPTER_WORDS
    regnal = previous in _REGNAL_NAMES and numeral.isupper() and (len(numeral) > 1 or numeral in "VX")
    if not chapter and not regnal:
        return ""
    value = roman_value(numeral)
    if value is None:
        return ""
    language = forced or default(text, space)
    if chapter:
        spoken = cardinal(value, language)
    elif language == "en":
        spoken = f"the {en_ordinal(value)}"
    else:
        return ""
    return padded(spoken, text, match.start(1), match.end())


def _opening_numeral(match: re.Match[str], default: DefaultLanguage, forced: str) -> str:
    """'XII. The Storm' → 'twelve. The Storm'; a paragraph that is only 'IV' → 'four'."""
    text, numeral_start, end = match.string, match.start(1), match.end(1)
    value = roman_value(match.group(1))
    rest = text[end : end + 8].lstrip(" " + DASH_MARK + ELLIPSIS)  # trailing pauses vanish later
    closes = not rest or rest[0] in (".", ":", SEPARATOR)
    single_letter = end - numeral_start == 1 and text[numeral_start] not in "VX"  # "C" alone: likely a letter
    if value is None or not closes or single_letter or (value == 1 and rest[:1] not in (".", ":")):
        return match.group(0)
    spoken = cardinal(value, forced or default(text, numeral_start))
    return text[match.start() : numeral_start] + padded(spoken, text, numeral_start, end)


def roman_value(numeral: str) -> int | None:
    """'XIV' → 14; None unless ``numeral`` is a well-formed Roman numeral of 1-3999."""
    numeral = numeral.upper()
    if not numeral or any(ch not in _ROMAN_VALUES for ch in numeral):
        return None
    total = 0
    for index, ch in enumerate(numeral):
        value = _ROMAN_VALUES[ch]
        following = _ROMAN_VALUES[numeral[index + 1]] if index + 1 < len(numeral) else 0
        total += -value if value < following else value
    if not 0 < total < 4000 or to_roman(total) != numeral:
        return None
    return total


def to_roman(number: int) -> str:
    """14 → 'XIV'."""
    out = ""
    for value, letters in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while number >= value:
            out += letters
            number -= value
    return out

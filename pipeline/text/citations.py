"""References of scholarly apparatus: a chapter and verse ('Ezekiel 2:1', 'Ps. 23:1-4') and a range
whose high end is shortened ('iii. 55-7' is lines 55 to 57, 'pp. 123-5' pages 123 to 125).

A colon between numbers after the name of a book of the Bible is no ratio and no time of day:
'Ezekiel 2:1' is read 'Ezekiel chapter two, verse one' (or '二章一节').
"""

from __future__ import annotations

import re

from pipeline.text.numbers import amount

_BOOKS = frozenset(
    "Genesis Gen Exodus Exod Ex Leviticus Lev Numbers Num Deuteronomy Deut Joshua Josh Judges Judg Ruth "
    "Samuel Sam Kings Kgs Chronicles Chron Ezra Nehemiah Neh Esther Esth Job Psalm Psalms Ps Psa Proverbs Prov "
    "Ecclesiastes Eccles Eccl Song Songs Canticles Isaiah Isa Jeremiah Jer Lamentations Lam Ezekiel Ezek "
    "Daniel Dan Hosea Hos Joel Amos Obadiah Obad Jonah Micah Mic Nahum Nah Habakkuk Hab Zephaniah Zeph "
    "Haggai Hag Zechariah Zech Malachi Mal Matthew Matt Mark Luke John Acts Romans Rom Corinthians Cor "
    "Galatians Gal Ephesians Eph Philippians Phil Colossians Col Thessalonians Thess Timothy Tim Titus "
    "Philemon Philem Hebrews Heb James Jas Peter Pet Jude Revelation Rev Revelations Tobit Judith "
    "Wisdom Sirach Ecclesiasticus Baruch Maccabees Macc".split()
)
_ZH_BOOK_END = re.compile(r"(?:记|書|书|篇|歌|传|傳|音|信|录|錄|言|章)\s?$")
# Where a two-digit range is a citation's: 'iii. 55-7', 'pp. 12-3', 'lines 45-9', 'vv. 10-2'.
_CITED_BEFORE = re.compile(r"(?:\b[ivxlc]{1,6}\.|\b(?:pp?|ll?|vv?|lines?|verses?|ch|chap|sec|pages?)\.?|§) ?$")
_WORD_BEFORE = re.compile(r"([A-Za-z]+)\.? ?$")


def verse(match: re.Match[str], language: str) -> str:
    """'2:1' after a book of the Bible → 'chapter two, verse one'; '5:3-8' → '... verses three to
    eight'; anything else is left to the ratio and time rules."""
    chapter, first, last = match.group(1), match.group(2), match.group(3)
    if not _after_book(match):
        return match.group(0)
    if language == "zh":
        verses = amount(first, "zh") + (f"至{amount(last, 'zh')}" if last else "")
        return f"{amount(chapter, 'zh')}章{verses}节"
    if last:
        return f"chapter {amount(chapter, 'en')}, verses {amount(first, 'en')} to {amount(last, 'en')}"
    return f"chapter {amount(chapter, 'en')}, verse {amount(first, 'en')}"


def shortened_range(match: re.Match[str], language: str) -> str:
    """'55-7' → 'fifty five to fifty seven', '123-25' → '... to one hundred twenty five': a range
    whose high end gives only its last digits; anything else is left to the later rules."""
    low, tail = match.group(1), match.group(2)
    if len(tail) >= len(low) or low.startswith("0"):
        return match.group(0)
    if len(low) == 2 and not _CITED_BEFORE.search(match.string, max(0, match.start() - 12), match.start()):
        return match.group(0)  # '12-3' alone is a score as likely as a range
    high = low[: len(low) - len(tail)] + tail
    if int(high) <= int(low) or len(low) == 4:  # '1990-91' is a span of years, read as years are
        return match.group(0)
    joiner = "至" if language == "zh" else " to "
    return amount(low, language) + joiner + amount(high, language)


def _after_book(match: re.Match[str]) -> bool:
    before = match.string[max(0, match.start() - 20) : match.start()]
    word = _WORD_BEFORE.search(before)
    if word:
        return word.group(1) in _BOOKS
    return bool(_ZH_BOOK_END.search(before))

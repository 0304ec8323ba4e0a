"""Numbers written together that are not one number: lists (``32,64,96``) and ratios (``16:9``).

``1,234,567`` is one number and ``32,64,96`` three, though both are digits joined by commas: a run
is a list when its groups cannot be thousands (``32,64``), or when it sits in brackets or after a
colon and its groups are all of three digits (``sizes: 128,256,512``, ``[100,200,300]``,
``[64,128,256,512]``). A colon
between numbers is a time of day (``4:45``) unless it cannot be one (``16:9``, ``1:100``) or the
sentence speaks of a ratio (``aspect ratio 16:10``, ``比分``).

Each reader returns the match itself where it is not what its rule looks for, so a later rule reads it.
"""

from __future__ import annotations

import re

from pipeline.text.marks import BREAK_MARK
from pipeline.text.numbers import amount, cardinal

_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_LIST_OPENING = re.compile(rf"(?:[:=：]|{BREAK_MARK}) ?$")
# Words that make 'a:b' a ratio: before it in its clause, or right after it.
_RATIO_BEFORE = re.compile(
    r"(?:(?i:ratio|aspect|scale|odds|proportion)|比例|比分|比率|宽高比|长宽比|之比)[^,.;，。；]*$"
)
_RATIO_AFTER = re.compile(r" ?(?:(?i:ratio|aspect|widescreen|screen|display|format|monitor)|比例|的比例|画幅|宽屏|屏幕)")
_RATIO_CONTEXT_CHARACTERS = 30


def number_list(match: re.Match[str], language: str) -> str:
    """'32,64,96' → 'thirty two, sixty four, ninety six' (or '三十二、六十四、九十六')."""
    run = match.group(0)
    items = run.split(",")
    if _THOUSANDS.fullmatch(run) and not _listed(match, items):
        return run
    joiner = "、" if language == "zh" else ", "
    return joiner.join(amount(item, language) for item in items)


def _listed(match: re.Match[str], items: list[str]) -> bool:
    """Groups of three digits that are still a list: in brackets, or after a colon or an equals sign,
    when the first is of three digits too ('[100,200,300]') or three items or more follow a first of
    two ('[64,128,256,512]'); '1,234' and '12,345' are always numbers."""
    if len(items[0]) != 3 and not (len(items) >= 3 and len(items[0]) == 2):
        return False
    text = match.string
    return bool(_LIST_OPENING.search(text, max(0, match.start() - 2), match.start()))


def ratio(match: re.Match[str], language: str) -> str:
    """'16:9' → 'sixteen to nine' (or '十六比九'); a time of day is left to the time rule."""
    parts = [part for part in match.groups() if part is not None]
    if not _is_ratio(match, parts):
        return match.group(0)
    joiner = "比" if language == "zh" else " to "
    return joiner.join(cardinal(int(part), language) for part in parts)


def _is_ratio(match: re.Match[str], parts: list[str]) -> bool:
    hour, minute = int(parts[0]), int(parts[1])
    if len(parts[1]) != 2 or hour > 24 or minute > 59 or (len(parts) == 3 and len(parts[2]) != 2):
        return True  # no clock reads like this
    text = match.string
    before = text[max(0, match.start() - _RATIO_CONTEXT_CHARACTERS) : match.start()]
    return bool(_RATIO_BEFORE.search(before) or _RATIO_AFTER.match(text, match.end()))

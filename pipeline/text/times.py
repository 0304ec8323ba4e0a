"""Times of day as words: 3:45, 10:30:15 pm, 7am."""

from __future__ import annotations

import re

from pipeline.text.numbers import en_cardinal, zh_cardinal


def clock_time(match: re.Match[str], language: str) -> str:
    """Hours and minutes (and seconds), with AM or PM when written."""
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3)) if match.group(3) else 0
    meridiem = (match.group(4) or "").replace(".", "").strip().upper()
    if language == "zh":
        prefix = {"AM": "上午", "PM": "下午"}.get(meridiem, "")
        spoken = f"{prefix}{zh_cardinal(hour)}点"
        if minute:
            spoken += f"{'零' if minute < 10 else ''}{zh_cardinal(minute)}分"
        return spoken + (f"{zh_cardinal(second)}秒" if second else "")
    if minute == 0:
        spoken = en_cardinal(hour) + ("" if meridiem else " o'clock")
    elif minute < 10:
        spoken = f"{en_cardinal(hour)} oh {en_cardinal(minute)}"
    else:
        spoken = f"{en_cardinal(hour)} {en_cardinal(minute)}"
    if second:
        spoken += f" and {en_cardinal(second)} seconds"
    return spoken + (f" {' '.join(meridiem)}" if meridiem else "")


def hour_with_meridiem(match: re.Match[str], language: str) -> str:
    """'7am' → 'seven A M' (or '上午七点')."""
    hour = int(match.group(1))
    meridiem = match.group(2).upper() + "M"
    if language == "zh":
        return f"{'上午' if meridiem == 'AM' else '下午'}{zh_cardinal(hour)}点"
    return f"{en_cardinal(hour)} {' '.join(meridiem)}"

"""Punctuation and spacing: one mark per pause, the strongest, in the width of the text around it.

Dashes, brackets, line breaks and ellipses arrive as placeholder marks; each run of marks and spaces
becomes one comma or full stop (full-width beside Chinese), and spaces become single.
"""

from __future__ import annotations

import re

from pipeline.text.marks import (
    BREAK_MARK,
    CJK_PUNCTUATION,
    CJK_RANGE,
    DASH_MARK,
    ELLIPSIS,
    PAUSE_MARKS,
    SEPARATOR,
)

_MARKS = f"，。！？、；：,.!?;:{ELLIPSIS}{PAUSE_MARKS}"
_RUN_CHARACTERS = frozenset(_MARKS + " ")
_MARK_TROUBLE = re.compile(rf"[ {_MARKS}] ?[{_MARKS}]")
_MARK_RUN = re.compile(rf" [{_MARKS}](?: ?[{_MARKS}])*|[{_MARKS}](?: ?[{_MARKS}])+|[{ELLIPSIS}{PAUSE_MARKS}]")
_LONE_APOSTROPHE = re.compile(r"'(?<![A-Za-z]')|'(?![A-Za-z])")
_SPACES = re.compile(r"  +")
_SPACE_BETWEEN_CJK = re.compile(rf" (?<=[{CJK_RANGE}{CJK_PUNCTUATION}] )(?=[{CJK_RANGE}{CJK_PUNCTUATION}])")
_HALF_WIDTH_AFTER_CJK = re.compile(rf"[,.!?;:](?<=[{CJK_RANGE}{CJK_PUNCTUATION}].)")
_HALF_WIDTH_BEFORE_CJK = re.compile(rf"[,.!?;:] ?(?=[{CJK_RANGE}])")  # 'Python, 我们' → 'Python，我们' 
_STRENGTH = {
    "?": 6,
    "？": 6,
    "!": 5,
    "！": 5,
    ".": 4,
    "。": 4,
    ";": 3,
    "；": 3,
    ":": 2,
    "：": 2,
    ",": 1,
    "，": 1,
    "、": 1,
    DASH_MARK: 0,
    BREAK_MARK: 0,
}
_FULL_WIDTH = {",": "，", ".": "。", "!": "！", "?": "？", ";": "；", ":": "："}
_HALF_WIDTH = {value: key for key, value in _FULL_WIDTH.items()}
LEADING_MARKS = "，。！？、；：,.!?;: "  # what a paragraph never starts with


def tidy(text: str) -> str:
    """One mark per pause (the strongest), in the width of the text around it; single spaces."""
    if "'" in text:
        text = _LONE_APOSTROPHE.sub(" ", text)
    if ELLIPSIS in text or DASH_MARK in text or BREAK_MARK in text:
        text = _resolve_pauses(text)
    if "  " in text:
        text = _SPACES.sub(" ", text)
    if _MARK_TROUBLE.search(text):  # "word ," or "?!": one scan rather than a test per pair
        text = _MARK_RUN.sub(_one_mark, text)
        if "  " in text:
            text = _SPACES.sub(" ", text)
    if not text.isascii():  # Chinese somewhere: its marks, then its spacing
        text = _HALF_WIDTH_AFTER_CJK.sub(lambda m: _FULL_WIDTH[m.group(0)], text)
        text = _HALF_WIDTH_BEFORE_CJK.sub(lambda m: _FULL_WIDTH[m.group(0)[0]], text)
        if " " in text:
            text = _SPACE_BETWEEN_CJK.sub("", text)
    return text


def _resolve_pauses(text: str) -> str:
    """Each dash, bracket, line break or ellipsis, with the marks and spaces around it, becomes one mark.

    Found with str.find rather than a regex: they are few, and a regex pass would cost a scan per chapter.
    """
    pieces: list[str] = []
    done = 0
    upcoming = {mark: text.find(mark) for mark in (ELLIPSIS, DASH_MARK, BREAK_MARK)}
    while True:
        found = [position for position in upcoming.values() if position >= 0]
        if not found:
            break
        at = min(found)
        start, end = at, at + 1
        while start > done and text[start - 1] in _RUN_CHARACTERS:
            start -= 1
        while end < len(text) and text[end] in _RUN_CHARACTERS:
            end += 1
        pieces.append(text[done:start])
        pieces.append(_pause(text, start, end))
        done = end
        for mark, position in upcoming.items():  # only marks swallowed by this run need looking for again
            if 0 <= position < end:
                upcoming[mark] = text.find(mark, end)
    pieces.append(text[done:])
    return "".join(pieces)


def _one_mark(match: re.Match[str]) -> str:
    return _pause(match.string, match.start(), match.end())


def _pause(string: str, start: int, end: int) -> str:
    """The one mark (with its space) that replaces string[start:end], a run of marks and spaces."""
    run = string[start:end]
    before_index = start
    while before_index > 0 and string[before_index - 1] == " ":
        before_index -= 1
    before = string[before_index - 1] if before_index > 0 else ""
    after_index = end
    while after_index < len(string) and string[after_index] == " ":
        after_index += 1
    after = string[after_index] if after_index < len(string) else ""
    before = "" if before == SEPARATOR else before
    after = "" if after == SEPARATOR else after
    mark = _strongest(run.replace(" ", ""), after)
    if not mark:
        return " "
    if before and not before.isascii() or (not before and after and not after.isascii()):
        return _FULL_WIDTH.get(mark, mark)
    mark = _HALF_WIDTH.get(mark, mark)
    spaced = run != mark
    return f"{mark} " if after and spaced else mark


def _strongest(marks: str, after: str) -> str:
    best, best_strength = "", -1
    for mark in marks:
        if mark == ELLIPSIS:  # "so..." before a capital or the end: a full stop; inside a sentence: a pause
            mark = "." if not after or after.isupper() or not after.isascii() else ","
        strength = _STRENGTH.get(mark, 0)
        if strength > best_strength:
            best, best_strength = mark, strength
    if best in PAUSE_MARKS:
        return "," if after else ""  # a pause at the very end of a paragraph is nothing
    return best

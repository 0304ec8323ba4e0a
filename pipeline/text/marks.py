"""The voice's alphabet, and the placeholder marks that the text stage's steps pass to one another.

The placeholders are ASCII control characters, which the first step deletes from the book's own text,
so they cannot be confused with it, and an English chapter stays a one-byte-per-character string
(Python's string and regex code is much faster on those).
"""

from __future__ import annotations

import re

CJK_RANGE = "\u4e00-\u9fff"
CJK_PUNCTUATION = "、。，！？：；"  # the Chinese marks the voice reads
ALLOWED = re.compile(rf"[A-Za-z{CJK_RANGE} ，。！？、；：,.!?;:']*")

SQUARED, CUBED = "\x02", "\x03"
ELLIPSIS = "\x05"  # resolved to '.' or ',' by what follows
DASH_MARK = "\x06"  # a dash: a pause, resolved to ',' or '，'; between two numbers, a range
BREAK_MARK = "\x07"  # a bracket or line break: a pause as a dash is, but never a range
PAUSE_MARKS = DASH_MARK + BREAK_MARK
# Between paragraphs normalised together; no rule reads across it. Not \x1c-\x1f: Python counts those
# as whitespace, so \s in a pattern would step over them into the next paragraph.
SEPARATOR = "\x1a"

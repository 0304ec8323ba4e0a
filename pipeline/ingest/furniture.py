"""Lines of a page that are no prose, found in a block's own text: navigation a documentation
toolchain adds to every topic ("Parent topic: Installing", "Next topic: Upgrading"), and words set
letter by letter for small capitals ("T h i s  s e c t i o n"), which the voice would spell out."""

from __future__ import annotations

import re

_NAVIGATION_LINE = re.compile(
    r"^(?:(?:parent|previous|next|prev) topic|related (?:concepts?|tasks?|references?|topics?|information|links)"
    r"|上级主题|父主题|上一主题|下一主题|上一个主题|下一个主题|相关概念|相关任务|相关参考|相关信息)\s*[:：]",
    re.IGNORECASE,
)
_MAX_NAVIGATION_CHARS = 300
# Letters each followed by one space, three or more: one letter-spaced word (words part at wider gaps).
_LETTERS = r"(?:[^\W\d_] )+[^\W\d_]"  # letters each followed by one space: one letter-spaced word
# Letter-spaced words one after another, parted by wider gaps: 'T h i s  s e c t i o n'.
_SPACED_WORDS = re.compile(rf"(?<![^\s(\"'“‘]){_LETTERS}(?:\s{{2,}}{_LETTERS})*(?![^\s.,;:!?)\"'”’])")
_LONG_WORD = re.compile(r"(?:[^\W\d_] ){3}")
_GAP = re.compile(r"(\s{2,})")


def is_navigation_line(text: str, link_chars: int) -> bool:
    """Whether a block is a navigation line: a label such as 'Parent topic:' and what it links to."""
    if not _NAVIGATION_LINE.match(text):
        return False
    return link_chars > 0 or len(text) <= _MAX_NAVIGATION_CHARS


def join_letter_spacing(text: str) -> tuple[str, int]:
    """``text`` with its letter-spaced words joined ('T h i s  s e c t i o n' → 'This  section'), and
    how many were joined. Only a run holding a word of four letters or more is joined, so that
    'a b c' in prose stays as written."""
    if not _LONG_WORD.search(text):
        return text, 0
    joined = 0

    def join(match: re.Match[str]) -> str:
        nonlocal joined
        if not _LONG_WORD.search(match.group(0)):
            return match.group(0)
        pieces = _GAP.split(match.group(0))
        joined += len(pieces[::2])
        return "".join(piece if index % 2 else piece.replace(" ", "") for index, piece in enumerate(pieces))

    return _SPACED_WORDS.sub(join, text), joined

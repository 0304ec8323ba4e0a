"""FFMETADATA1 files: how ffmpeg is told an M4B's tags and chapter markers.

Format reference: https://ffmpeg.org/ffmpeg-formats.html#Metadata-1 . Values must escape ``=``,
``;``, ``#``, ``\\`` and newlines with a backslash, or a chapter title such as ``A=B; #1`` is cut or
read as a comment. ``TIMEBASE`` is always written: without it START/END are read as nanoseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_SPECIAL = "\\=;#\n"


@dataclass(frozen=True)
class ChapterMark:
    """One chapter marker, in samples of the book's sample rate (exact, no rounding drift)."""

    title: str
    start: int
    end: int


def escape_value(value: str) -> str:
    """Escape one FFMETADATA key or value.

    Carriage returns become newlines (a CRLF title becomes LF), and every special character gets a
    backslash in front, including the newline itself, which ffmpeg then reads back as a newline.

    One thing cannot be written: a value *ending* in a backslash. ffmpeg's reader (5.x to at least
    9.x, ``read_line_to_bprint_escaped``) treats any newline after a backslash as escaped, even
    when that backslash is itself escaped, and the line swallows the next one (a chapter vanishes).
    Such a value gets a trailing space, the smallest change a listener cannot see.
    """
    value = value.replace("\r\n", "\n").replace("\r", "\n")
    if value.endswith("\\"):
        value += " "
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in value)


def render_ffmetadata(tags: Mapping[str, str], chapters: Sequence[ChapterMark], sample_rate: int) -> str:
    """Render tags and chapter marks as FFMETADATA1 text.

    Args:
        tags: global tags (ffmpeg keys such as ``title``, ``artist``, ``composer``); empty values skipped.
        chapters: in order; START/END are written in units of ``1/sample_rate`` seconds.
        sample_rate: the time base denominator.

    Returns:
        The file content, UTF-8 ready.
    """
    lines = [";FFMETADATA1"]
    lines += [f"{escape_value(key)}={escape_value(value)}" for key, value in tags.items() if value]
    for mark in chapters:
        lines += [
            "[CHAPTER]",
            f"TIMEBASE=1/{sample_rate}",
            f"START={mark.start}",
            f"END={mark.end}",
            f"title={escape_value(mark.title)}",
        ]
    return "\n".join(lines) + "\n"

"""The language of an M4B's chapter track, set in place after ffmpeg has written the file.

ffmpeg's mp4 muxer (5.x to at least 7.x) gives the QuickTime chapter track it makes a fixed
language (0, which players read as English), whatever the audio says, so a Chinese book's chapter
track claims ``eng``. Neither ffmpeg's options nor mutagen reach that box. The language is two bytes
in the track's ``mdhd`` box, so it is rewritten where it stands: no box changes size, no offset moves.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_HEADER = struct.Struct(">I4s")
TEXT_HANDLER = b"text"  # the handler type of ffmpeg's chapter track


class Mp4StructureError(ValueError):
    """The file is not an MP4 this module can read (ffmpeg never writes one)."""


def pack_language(code: str) -> int:
    """ISO 639-2 code -> the 15-bit form of ``mdhd`` (three letters, 5 bits each, offset 0x60)."""
    if len(code) != 3 or not code.isascii() or not code.isalpha():
        raise ValueError(f"not a three-letter language code: {code!r}")
    value = 0
    for letter in code.lower():
        value = (value << 5) | (ord(letter) - 0x60)
    return value


def unpack_language(value: int) -> str:
    return "".join(chr(((value >> shift) & 0x1F) + 0x60) for shift in (10, 5, 0))


def set_track_language(path: Path, handler: bytes, code: str) -> int:
    """Set the language of every track of ``path`` whose handler is ``handler`` to ``code``
    (ISO 639-2); returns how many tracks were set.

    Raises:
        Mp4StructureError: the file has no ``moov`` box or a box overruns its parent.
    """
    packed = struct.pack(">H", pack_language(code))
    with open(path, "r+b") as handle:
        moov_offset, moov = _read_moov(handle)
        offsets = [moov_offset + offset for offset, kind in _track_languages(moov) if kind == handler]
        for offset in offsets:
            handle.seek(offset)
            handle.write(packed)
    return len(offsets)


def track_languages(path: Path) -> list[tuple[bytes, str]]:
    """(handler type, language) of each track, in file order: what a test or a check reads back."""
    with open(path, "rb") as handle:
        _, moov = _read_moov(handle)
    return [(kind, unpack_language(struct.unpack_from(">H", moov, offset)[0]))
            for offset, kind in _track_languages(moov)]


def _read_moov(handle: BinaryIO) -> tuple[int, bytes]:
    """The ``moov`` box's content and its offset in the file (top-level boxes are skipped over)."""
    offset = 0
    while True:
        handle.seek(offset)
        header = handle.read(16)
        if len(header) < 8:
            raise Mp4StructureError("no moov box")
        size, kind = _HEADER.unpack_from(header)
        header_size = 8
        if size == 1:
            size, header_size = struct.unpack_from(">Q", header, 8)[0], 16
        if size == 0 or size < header_size:  # runs to the end of the file, or broken
            size = handle.seek(0, 2) - offset
        if kind == b"moov":
            handle.seek(offset + header_size)
            return offset + header_size, handle.read(size - header_size)
        offset += size


def _track_languages(moov: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset of the language field in ``moov``, handler type) of each ``trak``."""
    for start, end, kind in _boxes(moov, 0, len(moov)):
        if kind != b"trak":
            continue
        handler, language_at = b"", None
        for m_start, m_end, m_kind in _boxes(moov, start, end):
            if m_kind != b"mdia":
                continue
            for b_start, b_end, b_kind in _boxes(moov, m_start, m_end):
                if b_kind == b"hdlr" and b_end - b_start >= 12:
                    handler = moov[b_start + 8:b_start + 12]  # version+flags, pre_defined, type
                elif b_kind == b"mdhd" and b_end > b_start:
                    # version 0: 32-bit times and duration; version 1: 64-bit ones.
                    language_at = b_start + (20 if moov[b_start] == 0 else 32)
                    if language_at + 2 > b_end:
                        raise Mp4StructureError(f"mdhd box at {b_start} is too short")
        if language_at is not None:
            yield language_at, handler


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, bytes]]:
    """(content start, content end, type) of each box between ``start`` and ``end``."""
    offset = start
    while offset + 8 <= end:
        size, kind = _HEADER.unpack_from(data, offset)
        header_size = 8
        if size == 1:
            size, header_size = struct.unpack_from(">Q", data, offset + 8)[0], 16
        elif size == 0:
            size = end - offset
        if size < header_size or offset + size > end:
            raise Mp4StructureError(f"box {kind!r} at {offset} overruns its parent")
        yield offset + header_size, offset + size, kind
        offset += size

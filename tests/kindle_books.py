"""MOBI fixture books, written by hand: no Python library writes MOBI files, so this writes the
PalmDB container of a Mobipocket 6 book (uncompressed text records, an EXTH author) that Kindle
readers and KindleUnpack read."""

from __future__ import annotations

import struct
from pathlib import Path

_RECORD_SIZE = 4096
_HEADER_LENGTH = 0xE8  # the MOBI header, from its 'MOBI' magic
_NONE = 0xFFFFFFFF


def write_mobi(path: Path, title: str, author: str, html: str, *, encryption: int = 0) -> Path:
    """A MOBI book of ``html`` (Mobipocket markup); ``encryption`` other than 0 marks it as DRM'd."""
    text = html.encode("utf-8")
    records = [text[start : start + _RECORD_SIZE] for start in range(0, len(text), _RECORD_SIZE)]
    header = _record0(title, author, len(text), len(records), encryption)
    sections = [header, *records, b"\xe9\x8e\r\n"]
    path.write_bytes(_palm_database(title, sections))
    return path


def _record0(title: str, author: str, text_length: int, text_records: int, encryption: int) -> bytes:
    palmdoc = struct.pack(">HHLHHHH", 1, 0, text_length, text_records, _RECORD_SIZE, encryption, 0)
    exth = _exth({100: author.encode("utf-8"), 524: b"en"})
    title_bytes = title.encode("utf-8")
    title_offset = 16 + _HEADER_LENGTH + len(exth)
    fields = bytearray(b"\xff" * _HEADER_LENGTH)
    struct.pack_into(">4sLLLLL", fields, 0, b"MOBI", _HEADER_LENGTH, 2, 65001, 0x1234, 6)
    struct.pack_into(">LLL", fields, 0x50 - 16, text_records + 1, title_offset, len(title_bytes))
    struct.pack_into(">LLLL", fields, 0x5C - 16, 9, 0, 0, 6)  # English, minimum reader version 6
    struct.pack_into(">L", fields, 0x6C - 16, _NONE)  # no images
    struct.pack_into(">LLLLL", fields, 0x70 - 16, 0, 0, 0, 0, 0x40)  # no Huffman tables; EXTH present
    fields[0x84 - 16 : 0xA4 - 16] = b"\x00" * 32
    struct.pack_into(">LLLL", fields, 0xA8 - 16, _NONE, 0, 0, 0)  # no DRM record
    struct.pack_into(">LL", fields, 0xB8 - 16, 0, 0)
    struct.pack_into(">HH", fields, 0xC0 - 16, 1, text_records)
    struct.pack_into(">HH", fields, 0xF0 - 16, 0, 0)  # no trailing entries after text records
    return palmdoc + bytes(fields) + exth + title_bytes + b"\x00" * 4


def _exth(entries: dict[int, bytes]) -> bytes:
    body = b"".join(struct.pack(">LL", key, len(value) + 8) + value for key, value in entries.items())
    length = 12 + len(body)
    padding = (4 - length % 4) % 4
    return b"EXTH" + struct.pack(">LL", length, len(entries)) + body + b"\x00" * padding


def _palm_database(name: str, sections: list[bytes]) -> bytes:
    header = bytearray(78)
    header[:31] = name.encode("ascii", "replace")[:31].ljust(31, b"\x00")
    struct.pack_into(">4s4sLLH", header, 60, b"BOOK", b"MOBI", 2 * len(sections) - 1, 0, len(sections))
    offset = 78 + 8 * len(sections) + 2
    entries = bytearray()
    for number, section in enumerate(sections):
        entries += struct.pack(">LL", offset, 2 * number)
        offset += len(section)
    return bytes(header) + bytes(entries) + b"\x00\x00" + b"".join(sections)

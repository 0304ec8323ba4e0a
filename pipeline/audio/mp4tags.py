"""Tags ffmpeg's mp4 muxer cannot write, added to an M4B after the mux: iTunes freeform atoms
(``----:com.apple.iTunes:NAME``), which ffprobe shows under NAME and which Audiobookshelf reads
for the book's publisher, series, series part, ISBN, subtitle and language.

The mux reserves room for the index in front of the audio (:mod:`pipeline.audio.m4b`), so the
atoms go into the ``ilst`` box in place: the index grows into the ``free`` box behind it and the
audio does not move (no chunk offset changes). A file without that room (the ``+faststart``
fallback) is tagged by mutagen, which moves the audio behind the grown index.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

from mutagen.mp4 import MP4, MP4FreeForm

_HEADER = struct.Struct(">I4s")
MEAN = "com.apple.iTunes"
_PATH = (b"moov", b"udta", b"meta", b"ilst")


def freeform_atom(name: str, value: str) -> bytes:
    """One ``----`` atom: its mean, its name and its value as UTF-8 text (data type 1)."""
    mean = _box(b"mean", b"\0\0\0\0" + MEAN.encode("ascii"))
    named = _box(b"name", b"\0\0\0\0" + name.encode("utf-8"))
    data = _box(b"data", struct.pack(">II", 1, 0) + value.encode("utf-8"))
    return _box(b"----", mean + named + data)


def add_freeform_tags(path: Path, tags: Mapping[str, str]) -> None:
    """Add ``tags`` (name -> text; empty values skipped) to the M4B at ``path``."""
    tags = {name: value for name, value in tags.items() if value}
    if not tags:
        return
    atoms = b"".join(freeform_atom(name, value) for name, value in tags.items())
    if not _add_in_place(path, atoms):
        audio = MP4(str(path))
        for name, value in tags.items():
            audio[f"----:{MEAN}:{name}"] = [MP4FreeForm(value.encode("utf-8"))]
        audio.save()


def _add_in_place(path: Path, atoms: bytes) -> bool:
    """Grow ``ilst`` by ``atoms`` into the ``free`` box after ``moov``; False where there is no room."""
    with open(path, "r+b") as handle:
        size = handle.seek(0, 2)
        offset = 0
        while offset + 8 <= size:
            handle.seek(offset)
            length, kind = _HEADER.unpack(handle.read(8))
            if length < 8:
                return False  # 64-bit or to-the-end sizes: not ffmpeg's moov
            if kind == b"moov":
                break
            offset += length
        else:
            return False
        handle.seek(offset)
        moov = handle.read(length)
        handle.seek(offset + length)
        after = handle.read(8)
        if len(after) < 8:
            return False
        free_length, free_kind = _HEADER.unpack(after)
        room = free_length - len(atoms)
        if free_kind != b"free" or not (room == 0 or room >= 8):
            return False
        grown = _grow_ilst(moov, atoms)
        if grown is None:
            return False
        handle.seek(offset)
        handle.write(grown)
        if room:
            handle.write(_HEADER.pack(room, b"free"))
    return True


def _grow_ilst(moov: bytes, atoms: bytes) -> bytes | None:
    """``moov`` with ``atoms`` at the end of moov/udta/meta/ilst and those boxes' sizes grown."""
    starts: list[int] = []  # offset of each box of the path
    start, end = 0, len(moov)
    for wanted in _PATH:
        found = None
        position = start
        while position + 8 <= end:
            length, kind = _HEADER.unpack_from(moov, position)
            if length < 8 or position + length > end:
                return None
            if kind == wanted:
                found = position
                break
            position += length
        if found is None:
            return None
        starts.append(found)
        length = _HEADER.unpack_from(moov, found)[0]
        start, end = found + 8, found + length
        if wanted == b"meta":
            start += 4  # a full box: version and flags before its children
    data = bytearray(moov[:end] + atoms + moov[end:])
    for box in starts:
        struct.pack_into(">I", data, box, _HEADER.unpack_from(data, box)[0] + len(atoms))
    return bytes(data)


def _box(kind: bytes, content: bytes) -> bytes:
    return _HEADER.pack(8 + len(content), kind) + content

"""An M4B's iTunes tags: the items of ``moov/udta/meta/ilst``, written with the rest of its index
(:mod:`pipeline.audio.mp4_boxes`). The well-known atoms carry what players show (title, author,
narrator in ``©wrt``, ``stik`` = audiobook, the cover); freeform atoms
(``----:com.apple.iTunes:NAME``, which ffprobe shows under NAME) carry what Audiobookshelf reads for
the book's publisher, series, series part, ISBN, subtitle and language.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from pipeline.audio.mp4_boxes import box
from pipeline.audio.tags import TrackTags, m4b_freeform

MEAN = "com.apple.iTunes"
_UTF8, _INTEGER, _JPEG, _PNG = 1, 21, 13, 14  # the data atom's well-known types
_IMPLICIT = 0  # trkn's type: a layout of its own


def tag_items(tags: TrackTags, cover: bytes | None) -> bytes:
    """The ``ilst`` items for an M4B with ``tags`` and ``cover`` (JPEG or PNG bytes, or None)."""
    texts = [
        (b"\xa9nam", tags.title),
        (b"\xa9ART", tags.artist),
        (b"aART", tags.artist),
        (b"\xa9wrt", tags.narrator),  # where audiobook apps look for the narrator
        (b"\xa9alb", tags.album),
        (b"\xa9day", tags.year),
        (b"\xa9cmt", tags.description),
        (b"\xa9gen", tags.genre),
        (b"desc", tags.description),
    ]
    items = [_data_item(kind, _UTF8, value.encode("utf-8")) for kind, value in texts if value]
    items.append(_data_item(b"stik", _INTEGER, b"\x02"))  # 2: Audiobook
    if cover:
        items.append(_data_item(b"covr", _PNG if cover.startswith(b"\x89PNG") else _JPEG, cover))
    if tags.track_total > 1:
        items.append(_data_item(b"trkn", _IMPLICIT, struct.pack(">HHHH", 0, tags.track, tags.track_total, 0)))
    return b"".join(items) + freeform_items(m4b_freeform(tags))


def freeform_items(tags: Mapping[str, str]) -> bytes:
    """One ``----`` atom per tag (name -> text; empty values left out)."""
    return b"".join(freeform_atom(name, value) for name, value in tags.items() if value)


def freeform_atom(name: str, value: str) -> bytes:
    """One ``----`` atom: its mean, its name and its value as UTF-8 text (data type 1)."""
    mean = box(b"mean", b"\0\0\0\0" + MEAN.encode("ascii"))
    named = box(b"name", b"\0\0\0\0" + name.encode("utf-8"))
    return box(b"----", mean, named, _data(_UTF8, value.encode("utf-8")))


def _data_item(kind: bytes, data_type: int, value: bytes) -> bytes:
    return box(kind, _data(data_type, value))


def _data(data_type: int, value: bytes) -> bytes:
    return box(b"data", struct.pack(">II", data_type, 0), value)

"""The book's language as tags spell it, and the chapter track's language set inside an MP4."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pipeline.audio.languages import container_language, iso639_2
from pipeline.audio.mp4lang import (
    TEXT_HANDLER,
    Mp4StructureError,
    pack_language,
    set_track_language,
    track_languages,
    unpack_language,
)


@pytest.mark.parametrize("stated, code", [
    ("en", "eng"), ("en-GB", "eng"), ("EN_us", "eng"), ("zh", "zho"), ("zh-CN", "zho"),
    ("zh-Hans-CN", "zho"), ("chi", "zho"), ("ger", "deu"), ("fr-CA", "fra"), ("yue", "yue"),
    ("cmn-Hans", "cmn"), ("", ""), ("English", ""), ("x-klingon", ""), ("q1", ""), ("e1g", ""),
])
def test_iso639_2_of_what_books_state(stated: str, code: str) -> None:
    assert iso639_2(stated) == code


def test_a_container_says_und_for_a_language_nobody_knows() -> None:
    assert container_language("") == container_language("English") == "und"
    assert container_language("zh-TW") == "zho"


def test_packed_language_is_the_mp4_form() -> None:
    assert pack_language("eng") == 0x15C7  # the bytes every English MP4 track carries
    assert pack_language("und") == 0x55C4
    assert unpack_language(pack_language("zho")) == "zho"
    with pytest.raises(ValueError):
        pack_language("en")


def box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def trak(handler: bytes, mdhd_version: int, language: str) -> bytes:
    times = struct.pack(">QQIQ", 1, 2, 24_000, 2**33) if mdhd_version else struct.pack(">IIII", 1, 2, 24_000, 9)
    mdhd = box(b"mdhd", bytes([mdhd_version, 0, 0, 0]) + times + struct.pack(">HH", pack_language(language), 0))
    hdlr = box(b"hdlr", bytes(4) + bytes(4) + handler + bytes(12) + b"Handler\x00")
    return box(b"trak", box(b"tkhd", bytes(84)) + box(b"mdia", mdhd + hdlr))


def write_mp4(path: Path, *traks: bytes, large_mdat: bool = False) -> bytes:
    mdat = struct.pack(">I4sQ", 1, b"mdat", 16 + 4) + bytes(4) if large_mdat else box(b"mdat", bytes(4))
    data = box(b"ftyp", b"M4B \x00\x00\x02\x00") + mdat + box(b"moov", box(b"mvhd", bytes(100)) + b"".join(traks))
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("mdhd_version", [0, 1])  # version 1: a book over 49.7 hours at 24 kHz
def test_only_the_chapter_track_is_set_and_nothing_moves(tmp_path: Path, mdhd_version: int) -> None:
    path = tmp_path / "book.m4b"
    before = write_mp4(path, trak(b"soun", mdhd_version, "und"), trak(TEXT_HANDLER, mdhd_version, "eng"),
                       large_mdat=True)

    assert set_track_language(path, TEXT_HANDLER, "zho") == 1

    assert track_languages(path) == [(b"soun", "und"), (TEXT_HANDLER, "zho")]
    after = path.read_bytes()
    assert len(after) == len(before)
    assert sum(a != b for a, b in zip(before, after, strict=True)) <= 2  # the two language bytes


def test_a_file_without_a_chapter_track_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "book.m4b"
    before = write_mp4(path, trak(b"soun", 0, "eng"))
    assert set_track_language(path, TEXT_HANDLER, "zho") == 0
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", [b"", b"not an mp4 at all", box(b"ftyp", b"M4A ")])
def test_a_file_that_is_no_mp4_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.m4b"
    path.write_bytes(content)
    with pytest.raises(Mp4StructureError):
        set_track_language(path, TEXT_HANDLER, "zho")


def test_a_box_overrunning_its_parent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.m4b"
    path.write_bytes(box(b"moov", struct.pack(">I4s", 4096, b"trak") + bytes(16)))
    with pytest.raises(Mp4StructureError):
        set_track_language(path, TEXT_HANDLER, "zho")

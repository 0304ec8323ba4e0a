"""The boxes of an M4B's index (``moov``), built as ffmpeg's mp4 muxer (``-f ipod``) lays them out:
one AAC track with an edit list that hides the encoder's priming, a QuickTime chapter track (text
samples, referenced from the audio by ``tref/chap``), and ``udta`` with the iTunes tags and Nero
chapters (``chpl``). Every table is built from numbers already known (frame sizes, chapter marks),
so the index is written once, in front of the audio: the file starts playing before it has all
arrived, without ffmpeg's ``+faststart`` rewrite of the whole file.

Each audio track's frames are one chunk, as ffmpeg writes them, so one chunk offset (``stco``)
places them all; the chapter titles are one chunk in front of them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MOVIE_TIMESCALE = 1000  # mvhd and tkhd durations, and the chapter track's clock: milliseconds
AUDIO_TRACK, CHAPTER_TRACK = 1, 2
_MATRIX = bytes.fromhex("000100000000000000000000000000000001000000000000000000000000000040000000")
# ffmpeg's QuickTime text sample entry and generic media header for a chapter track, byte for byte
_TEXT_SAMPLE_ENTRY = bytes.fromhex("000000000000000100000001000000000000000000000000000000000000000100"
                                   "00000000000000000d667461620001000100")
_GMHD = bytes.fromhex("00000018676d696e000000000040800080008000000000000000002c746578740001000000000000"
                      "00000000000000000001000000000000000000000000000040000000")
_ENCD = bytes.fromhex("0000000c656e636400000100")  # a chapter title's "encoded as UTF-8" atom
_U32 = struct.Struct(">I")


@dataclass(frozen=True)
class AudioTrack:
    sample_rate: int
    config: int  # AudioSpecificConfig
    sizes: np.ndarray  # bytes of each AAC frame
    frame: int  # samples per frame
    priming: int  # samples hidden by the edit list
    language: str  # ISO 639-2
    offset: int  # where the frames start in the file


@dataclass(frozen=True)
class ChapterTrack:
    titles: Sequence[str]
    starts_ms: Sequence[int]  # each title's start on the movie clock
    end_ms: int
    language: str  # ISO 639-2: ffmpeg's mux gave this track no language (players read English)
    offset: int  # where the titles (``chapter_samples``) start in the file


def pack_language(code: str) -> int:
    """ISO 639-2 code -> the 15-bit form of ``mdhd`` (three letters, 5 bits each, offset 0x60)."""
    if len(code) != 3 or not code.isascii() or not code.isalpha():
        raise ValueError(f"not a three-letter language code: {code!r}")
    value = 0
    for letter in code.lower():
        value = (value << 5) | (ord(letter) - 0x60)
    return value


def box(kind: bytes, *content: bytes) -> bytes:
    body = b"".join(content)
    return _U32.pack(8 + len(body)) + kind + body


def full_box(kind: bytes, version: int, flags: int, *content: bytes) -> bytes:
    return box(kind, _U32.pack((version << 24) | flags), *content)


def file_type(brand: bytes) -> bytes:
    return box(b"ftyp", brand, _U32.pack(0x200), brand, b"isom", b"iso2")


def chapter_samples(titles: Sequence[str]) -> list[bytes]:
    """Each chapter title as a QuickTime text sample: its length, its UTF-8 text, ``encd``."""
    samples = []
    for title in titles:
        text = title.encode("utf-8")[:0xFFFF]
        samples.append(struct.pack(">H", len(text)) + text + _ENCD)
    return samples


def audio_played_ms(audio: AudioTrack) -> float:
    return (len(audio.sizes) * audio.frame - audio.priming) * MOVIE_TIMESCALE / audio.sample_rate


def movie(audio: AudioTrack, chapters: ChapterTrack | None, tags: bytes) -> bytes:
    """The ``moov`` box. ``tags``: the ``ilst`` box's items (:mod:`pipeline.audio.mp4tags`)."""
    audio_ms = math.ceil(audio_played_ms(audio))
    longest = max(audio_ms, chapters.end_ms if chapters is not None else 0)
    header = full_box(b"mvhd", 0, 0, struct.pack(">IIIIIH10x", 0, 0, MOVIE_TIMESCALE, longest, 0x10000, 0x100),
                      _MATRIX, bytes(24), _U32.pack(CHAPTER_TRACK + 1))
    traks = [_audio_trak(audio, audio_ms, chapters is not None)]
    if chapters is not None:
        traks.append(_chapter_trak(chapters))
    udta = box(b"udta", _tags_box(tags), _nero_chapters(chapters) if chapters is not None else b"")
    return box(b"moov", header, *traks, udta)


def _track_header(track: int, flags: int, duration_ms: int, audio: bool) -> bytes:
    return full_box(b"tkhd", 0, flags, struct.pack(">IIIIIQhhhH", 0, 0, track, 0, duration_ms, 0, 0,
                                                      1 if audio else 0, 0x100 if audio else 0, 0),
                    _MATRIX, bytes(8))


def _edit_list(duration_ms: int, media_time: int) -> bytes:
    return box(b"edts", full_box(b"elst", 0, 0, struct.pack(">IIiI", 1, duration_ms, media_time, 0x10000)))


def _media_header(timescale: int, duration: int, language: str) -> bytes:
    packed = pack_language(language)
    if duration >= 2**32:  # a book of over 49 hours at 24 kHz in one part
        return full_box(b"mdhd", 1, 0, struct.pack(">QQIQHH", 0, 0, timescale, duration, packed, 0))
    return full_box(b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, timescale, duration, packed, 0))


def _handler(kind: bytes, name: bytes) -> bytes:
    return full_box(b"hdlr", 0, 0, bytes(4), kind, bytes(12), name + b"\0")


def _data_information() -> bytes:
    return box(b"dinf", full_box(b"dref", 0, 0, _U32.pack(1), full_box(b"url ", 0, 1)))


def _audio_trak(audio: AudioTrack, duration_ms: int, has_chapters: bool) -> bytes:
    count = len(audio.sizes)
    table = box(
        b"stbl",
        full_box(b"stsd", 0, 0, _U32.pack(1), _mp4a(audio)),
        full_box(b"stts", 0, 0, struct.pack(">III", 1, count, audio.frame)),
        full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, count, 1)),
        full_box(b"stsz", 0, 0, struct.pack(">II", 0, count), audio.sizes.astype(">u4").tobytes()),
        full_box(b"stco", 0, 0, struct.pack(">II", 1, audio.offset)),
        # every AAC frame needs the one before it decoded first (roll distance -1), as ffmpeg says
        full_box(b"sgpd", 1, 0, b"roll", struct.pack(">IIh", 2, 1, -1)),
        full_box(b"sbgp", 0, 0, b"roll", struct.pack(">III", 1, count, 1)),
    )
    media = box(b"mdia", _media_header(audio.sample_rate, count * audio.frame, audio.language),
                _handler(b"soun", b"SoundHandler"),
                box(b"minf", full_box(b"smhd", 0, 0, bytes(4)), _data_information(), table))
    played_ms = round(audio_played_ms(audio))
    return box(b"trak", _track_header(AUDIO_TRACK, 3, duration_ms, audio=True),
               _edit_list(played_ms, audio.priming),
               box(b"tref", box(b"chap", _U32.pack(CHAPTER_TRACK))) if has_chapters else b"", media)


def _mp4a(audio: AudioTrack) -> bytes:
    seconds = len(audio.sizes) * audio.frame / audio.sample_rate
    average = round(8 * int(audio.sizes.sum(dtype=np.int64)) / seconds) if seconds else 0
    per_second = round(audio.sample_rate / audio.frame)
    whole = len(audio.sizes) // per_second * per_second
    windows = audio.sizes[:whole].reshape(-1, per_second).sum(axis=1, dtype=np.int64) if whole else [0]
    peak = max(8 * int(np.max(windows)), average)
    decoder = _descriptor(4, struct.pack(">BB3xII", 0x40, 0x15, peak, average),
                          _descriptor(5, struct.pack(">H", audio.config)))
    es = _descriptor(3, struct.pack(">HB", 1, 0), decoder, _descriptor(6, b"\x02"))
    entry = struct.pack(">6xHHH4xHHHHI", 1, 0, 0, 2, 16, 0, 0, audio.sample_rate << 16)
    return box(b"mp4a", entry, full_box(b"esds", 0, 0, es))


def _descriptor(tag: int, *content: bytes) -> bytes:
    body = b"".join(content)
    return bytes([tag, 0x80, 0x80, 0x80, len(body)]) + body


def _chapter_trak(chapters: ChapterTrack) -> bytes:
    samples = chapter_samples(chapters.titles)
    durations = np.diff([*chapters.starts_ms, chapters.end_ms])
    stts = b"".join(struct.pack(">II", 1, int(d)) for d in durations)
    table = box(
        b"stbl",
        full_box(b"stsd", 0, 0, _U32.pack(1), box(b"text", _TEXT_SAMPLE_ENTRY)),
        full_box(b"stts", 0, 0, _U32.pack(len(samples)), stts),
        full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, len(samples), 1)),
        full_box(b"stsz", 0, 0, struct.pack(">II", 0, len(samples)),
                 b"".join(_U32.pack(len(s)) for s in samples)),
        full_box(b"stco", 0, 0, struct.pack(">II", 1, chapters.offset)),
    )
    media = box(b"mdia", _media_header(MOVIE_TIMESCALE, chapters.end_ms, chapters.language),
                _handler(b"text", b"SubtitleHandler"),
                box(b"minf", box(b"gmhd", _GMHD), _data_information(), table))
    return box(b"trak", _track_header(CHAPTER_TRACK, 2, chapters.end_ms, audio=False),
               _edit_list(chapters.end_ms, 0), media)


def _tags_box(items: bytes) -> bytes:
    handler = full_box(b"hdlr", 0, 0, bytes(4), b"mdir", b"appl", bytes(9))
    return full_box(b"meta", 0, 0, handler, box(b"ilst", items))


def _nero_chapters(chapters: ChapterTrack) -> bytes:
    """``chpl``: what Nero-style readers (and some Android players) take the chapters from; at
    most 255 of them, titles cut to 255 bytes on a character's edge, as ffmpeg does."""
    entries = []
    for title, start_ms in list(zip(chapters.titles, chapters.starts_ms, strict=True))[:255]:
        text = title.encode("utf-8")[:255].decode("utf-8", "ignore").encode("utf-8")
        entries.append(struct.pack(">QB", start_ms * 10_000, len(text)) + text)
    return full_box(b"chpl", 1, 0, bytes(4), bytes([len(entries)]), *entries)

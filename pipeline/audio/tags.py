"""Tags and covers for the per-chapter files (MP3, Ogg Opus, FLAC, WAV), written with mutagen.

The M4B gets its tags from ffmpeg (see :mod:`pipeline.audio.m4b`); mutagen cannot write MP4
chapters, and ffmpeg writes tags, chapters and cover in the same pass; what ffmpeg cannot write
goes in afterwards as freeform atoms (:func:`m4b_freeform`, :mod:`pipeline.audio.mp4tags`).

What the book states is written where Audiobookshelf (``server/utils/prober.js``) and Apple Books
look: publisher (ID3 TPUB, PUBLISHER), subtitle (TIT3, SUBTITLE), series and its part (SERIES and
SERIES-PART: ID3 TXXX frames, Vorbis comments, MP4 freeform atoms), ISBN (ISBN), language (TLAN,
LANGUAGE) and the book's subjects as its genre, ';'-separated, as Audiobookshelf splits them
("Audiobook" only where the book states none).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from mutagen.flac import FLAC, Picture
from mutagen.id3 import (
    APIC,
    COMM,
    ID3,
    TALB,
    TCOM,
    TCON,
    TDRC,
    TIT2,
    TIT3,
    TLAN,
    TPE1,
    TPE2,
    TPUB,
    TRCK,
    TXXX,
)
from mutagen.oggopus import OggOpus
from mutagen.wave import WAVE

from pipeline.audio.languages import iso639_2
from pipeline.types import BookMetadata

GENRE = "Audiobook"
FRONT_COVER = 3  # ID3/FLAC picture type


@dataclass(frozen=True)
class TrackTags:
    """Everything one output file is tagged with."""

    title: str
    album: str
    artist: str  # the author(s)
    narrator: str
    year: str
    description: str
    track: int  # 1-based
    track_total: int
    language: str = ""  # the book's BCP-47 tag ("zh-CN"); ID3 gets its ISO 639-2 code
    cover: bytes | None = None
    cover_mime: str = ""
    genre: str = GENRE
    subtitle: str = ""
    publisher: str = ""
    series: str = ""
    series_part: str = ""
    isbn: str = ""


def book_genre(metadata: BookMetadata) -> str:
    """The book's subjects as one genre tag ('Fiction; Sea stories'), else 'Audiobook'."""
    subjects = [" ".join(subject.replace(";", ",").split()) for subject in metadata.subjects]
    return "; ".join(subject for subject in subjects if subject) or GENRE


def custom_tags(tags: TrackTags) -> dict[str, str]:
    """The tags without a standard frame everywhere, by the names Audiobookshelf reads
    (ID3 TXXX descriptions, Vorbis comment names, MP4 freeform names); empty ones left out."""
    entries = {"SERIES": tags.series, "SERIES-PART": tags.series_part if tags.series else "", "ISBN": tags.isbn}
    return {name: value for name, value in entries.items() if value}


def m4b_freeform(tags: TrackTags) -> dict[str, str]:
    """What an M4B carries as freeform atoms: what ffmpeg's mp4 muxer drops (publisher, subtitle,
    the file-level language) and the custom tags."""
    entries = {"SUBTITLE": tags.subtitle, "PUBLISHER": tags.publisher, "LANGUAGE": tags.language}
    return {**{name: value for name, value in entries.items() if value}, **custom_tags(tags)}


def book_year(metadata: BookMetadata) -> str:
    """The year part of the book's date ('' when it has none)."""
    year = metadata.date.strip()[:4]
    return year if len(year) == 4 and year.isdigit() else ""


def track_tags(metadata: BookMetadata, narrator: str, title: str, track: int, track_total: int) -> TrackTags:
    """Tags for one file of the book."""
    return TrackTags(
        title=title,
        album=metadata.title,
        artist=", ".join(metadata.authors),
        narrator=narrator,
        year=book_year(metadata),
        description=metadata.description,
        track=track,
        track_total=track_total,
        language=metadata.language,
        cover=metadata.cover,
        cover_mime=cover_mime(metadata),
        genre=book_genre(metadata),
        subtitle=metadata.subtitle,
        publisher=metadata.publisher,
        series=metadata.series,
        series_part=metadata.series_index,
        isbn=metadata.isbn,
    )


def cover_mime(metadata: BookMetadata) -> str:
    """The cover's MIME type, from the metadata or sniffed from its bytes ('' if there is no cover)."""
    if not metadata.cover:
        return ""
    if metadata.cover.startswith(b"\x89PNG"):
        return "image/png"
    if metadata.cover.startswith(b"\xff\xd8"):
        return "image/jpeg"
    return metadata.cover_mime or "image/jpeg"


def write_tags(path: Path, audio_format: str, tags: TrackTags) -> None:
    """Tag ``path`` (already encoded as ``audio_format``) in place."""
    writers = {"mp3": _tag_mp3, "ogg": _tag_opus, "flac": _tag_flac, "wav": _tag_wav}
    writers[audio_format](path, tags)


def _id3_frames(tags: TrackTags, with_cover: bool) -> list:
    frames = [
        TIT2(encoding=3, text=tags.title),
        TALB(encoding=3, text=tags.album),
        TCON(encoding=3, text=tags.genre),
        TRCK(encoding=3, text=f"{tags.track}/{tags.track_total}"),
    ]
    if tags.artist:
        frames += [TPE1(encoding=3, text=tags.artist), TPE2(encoding=3, text=tags.artist)]
    if tags.narrator:
        frames.append(TCOM(encoding=3, text=tags.narrator))
    if tags.year:
        frames.append(TDRC(encoding=3, text=tags.year))
    if iso639_2(tags.language):
        frames.append(TLAN(encoding=3, text=iso639_2(tags.language)))
    if tags.subtitle:
        frames.append(TIT3(encoding=3, text=tags.subtitle))
    if tags.publisher:
        frames.append(TPUB(encoding=3, text=tags.publisher))
    frames += [TXXX(encoding=3, desc=name, text=value) for name, value in custom_tags(tags).items()]
    if tags.description:
        frames.append(COMM(encoding=3, lang="eng", desc="", text=tags.description))
    if with_cover and tags.cover:
        frames.append(APIC(encoding=3, mime=tags.cover_mime, type=FRONT_COVER, desc="Cover", data=tags.cover))
    return frames


def _tag_mp3(path: Path, tags: TrackTags) -> None:
    id3 = ID3()
    for frame in _id3_frames(tags, with_cover=True):
        id3.add(frame)
    id3.save(str(path), v2_version=3)  # ID3v2.3: what most car stereos and older players read


def _tag_wav(path: Path, tags: TrackTags) -> None:
    wav = WAVE(str(path))
    wav.add_tags()
    for frame in _id3_frames(tags, with_cover=False):  # players ignore pictures in WAV
        wav.tags.add(frame)
    wav.save()


def _vorbis_comments(tags: TrackTags) -> dict[str, str]:
    comments = {
        "TITLE": tags.title,
        "ALBUM": tags.album,
        "ARTIST": tags.artist,
        "ALBUMARTIST": tags.artist,
        "COMPOSER": tags.narrator,
        "PERFORMER": tags.narrator,
        "GENRE": tags.genre,
        "TRACKNUMBER": str(tags.track),
        "TRACKTOTAL": str(tags.track_total),
        "DATE": tags.year,
        "DESCRIPTION": tags.description,
        "LANGUAGE": tags.language,  # Vorbis comments have no code list: the book's BCP-47 tag
        "SUBTITLE": tags.subtitle,
        "PUBLISHER": tags.publisher,
        **custom_tags(tags),
    }
    return {key: value for key, value in comments.items() if value}


def _flac_picture(tags: TrackTags) -> Picture:
    picture = Picture()
    picture.type = FRONT_COVER
    picture.mime = tags.cover_mime
    picture.desc = "Cover"
    picture.data = tags.cover or b""
    return picture


def _tag_opus(path: Path, tags: TrackTags) -> None:
    audio = OggOpus(str(path))
    audio.delete()
    audio.update(_vorbis_comments(tags))
    if tags.cover:
        # Ogg has no picture block: the FLAC picture structure goes in a comment, base64-encoded.
        audio["METADATA_BLOCK_PICTURE"] = base64.b64encode(_flac_picture(tags).write()).decode("ascii")
    audio.save()


def _tag_flac(path: Path, tags: TrackTags) -> None:
    audio = FLAC(str(path))
    audio.delete()
    audio.update(_vorbis_comments(tags))
    audio.clear_pictures()
    if tags.cover:
        audio.add_picture(_flac_picture(tags))
    audio.save()

"""The M4B mux: encoded AAC pieces joined into one file with tags, QuickTime + Nero chapters, the
cover as attached picture, ``stik`` = audiobook, brand ``M4B ``, the book's language on the audio
and chapter tracks (:mod:`pipeline.audio.mp4lang`), and its index (``moov``) first, so that a
player or a web server can start it before it has the whole file.

ffmpeg's ``+faststart`` puts the index first by writing the file and then rewriting all of it
(185 MB for a 6-hour book) behind a moved index. Instead the mux reserves room for the index at
the file's start (``-moov_size``): every AAC frame is known before the mux, so the index's size
is too (4 bytes a frame in ``stsz``, a little per chapter, the tags and the cover), and the file
is written once. ffmpeg reports a reservation that was too small by an error message but exit
status 0, with its index written over the audio, so the file's top-level boxes are checked
after the mux; a file that fails the check is muxed again with ``+faststart``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from pathlib import Path

from pipeline.audio.aac import PRIMING, AacPiece, chapter_starts, playable_samples
from pipeline.audio.export import BITEXACT, encode_file
from pipeline.audio.failures import os_error_fix
from pipeline.audio.ffmeta import ChapterMark, render_ffmetadata
from pipeline.audio.languages import container_language
from pipeline.audio.mp4lang import TEXT_HANDLER, set_track_language
from pipeline.audio.mp4tags import add_freeform_tags
from pipeline.audio.stitch import StitchedChapter
from pipeline.audio.tags import TrackTags, m4b_freeform
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

# The brand audiobook players (Apple Books among them) file a book under; ffmpeg's ipod muxer
# writes "M4A " (music) otherwise.
M4B_BRAND = "M4B "
INDEX_BYTES_PER_FRAME = 5  # ffmpeg writes ~4.01 (stsz 4, chunk tables the rest): 1 byte to spare
INDEX_BYTES_PER_CHAPTER = 512  # chapter track tables and Nero ``chpl`` entry: titles up to ~450 bytes
INDEX_SLACK_BYTES = 64 * 1024  # header boxes, track headers, edit list
_TOP_LEVEL_BOXES = {b"ftyp", b"moov", b"free", b"skip", b"mdat", b"wide", b"uuid"}


class IndexNotFirst(Exception):
    """The muxed file's index is not in front of its audio (the reservation was too small)."""


def m4b_tags(tags: TrackTags) -> dict[str, str]:
    """ffmpeg metadata keys for an M4B (mapped by the mp4 muxer onto iTunes atoms)."""
    entries = {
        "title": tags.title,  # ©nam
        "album": tags.album,  # ©alb
        "artist": tags.artist,  # ©ART
        "album_artist": tags.artist,  # aART
        "composer": tags.narrator,  # ©wrt: where audiobook apps look for the narrator
        "genre": tags.genre,  # ©gen
        "date": tags.year,  # ©day
        "description": tags.description,  # desc
        "comment": tags.description,  # ©cmt
        "media_type": "2",  # stik = 2: Audiobook
    }
    if tags.track_total > 1:
        entries["track"] = f"{tags.track}/{tags.track_total}"
    return entries


def mux_m4b(
    chapters: Sequence[StitchedChapter],
    pieces: Sequence[AacPiece],
    aac_paths: Sequence[Path],
    frame_counts: Sequence[int],
    tags: TrackTags,
    final_path: Path,
    cover_path: Path | None,
) -> Path:
    """Join encoded chapters into one M4B with tags, chapter marks and cover (no re-encoding),
    its index first.

    Raises:
        AssemblyError: ffmpeg failed or the disk is full; no file is left under the final name.
    """
    work_dir = aac_paths[0].parent
    meta_path = work_dir / f".{final_path.stem}.ffmetadata"
    metadata = m4b_tags(tags)
    _write_text(meta_path, render_ffmetadata(metadata, m4b_marks(chapters, pieces, frame_counts), SAMPLE_RATE))
    reserve = index_bytes(sum(frame_counts), chapters, {**metadata, **m4b_freeform(tags)}, cover_path)
    try:
        return _mux(aac_paths, meta_path, cover_path, tags, final_path, ["-moov_size", str(reserve)])
    except IndexNotFirst:
        log.warning("%s: %d bytes were too few for the index; writing it again with +faststart",
                    final_path, reserve)
        return _mux(aac_paths, meta_path, cover_path, tags, final_path, ["-movflags", "+faststart"])


def index_bytes(frames: int, chapters: Sequence[StitchedChapter], metadata: dict[str, str],
                cover_path: Path | None) -> int:
    """Room enough for the M4B's index: its frame table, chapters, tags and cover."""
    cover = cover_path.stat().st_size if cover_path is not None else 0
    tag_bytes = sum(len(value.encode("utf-8")) for value in metadata.values())
    titles = sum(len(chapter.title.encode("utf-8")) for chapter in chapters)
    return (INDEX_BYTES_PER_FRAME * frames + INDEX_BYTES_PER_CHAPTER * len(chapters) + 2 * titles
            + 2 * tag_bytes + cover + INDEX_SLACK_BYTES)


def _mux(aac_paths: Sequence[Path], meta_path: Path, cover_path: Path | None, tags: TrackTags,
         final_path: Path, index_args: list[str]) -> Path:
    """One ffmpeg mux of the pieces; ``index_args`` say how the index is put first."""
    # The concat protocol joins the ADTS files byte for byte: one continuous stream, no timestamp
    # seams. Names are relative (run in work_dir) because '|' separates them.
    joined = "concat:" + "|".join(path.name for path in aac_paths)
    # The negative input offset makes the muxer write an edit list hiding the first priming frame.
    args = ["-itsoffset", f"-{PRIMING / SAMPLE_RATE:.9f}", "-f", "aac", "-i", joined]
    args += ["-f", "ffmetadata", "-i", str(meta_path.resolve())]
    if cover_path is not None:
        args += ["-i", str(cover_path.resolve())]
    args += ["-map", "0:a", "-c:a", "copy"]
    if cover_path is not None:
        args += ["-map", "2:v", "-c:v", "copy", "-disposition:v", "attached_pic"]
    language = container_language(tags.language)
    args += ["-map_metadata", "1", "-map_chapters", "1", "-metadata:s:a:0", f"language={language}"]
    if final_path.suffix.lower() == ".m4b":
        args += ["-brand", M4B_BRAND]
    args += [*index_args, *BITEXACT, "-f", "ipod"]

    def finish(partial: Path) -> None:
        if not index_first(partial):
            raise IndexNotFirst(str(partial))
        set_track_language(partial, TEXT_HANDLER, language)
        add_freeform_tags(partial, m4b_freeform(tags))

    return encode_file(args, final_path.resolve(), "write the M4B", cwd=aac_paths[0].parent, finish=finish)


def index_first(path: Path) -> bool:
    """Whether ``path`` is a whole MP4 whose index (``moov``) comes before its audio (``mdat``):
    its top-level boxes are ones ffmpeg writes and fill the file exactly."""
    boxes, size = [], path.stat().st_size
    with open(path, "rb") as handle:
        position = 0
        while position < size:
            handle.seek(position)
            header = handle.read(16)
            if len(header) < 8:
                return False
            length, kind = struct.unpack(">I4s", header[:8])
            if length == 1 and len(header) == 16:
                length = struct.unpack(">Q", header[8:])[0]
            if kind not in _TOP_LEVEL_BOXES or length < 8:
                return False
            boxes.append(kind)
            position += length
    return position == size and b"moov" in boxes and b"mdat" in boxes and \
        boxes.index(b"moov") < boxes.index(b"mdat")


def m4b_marks(
    chapters: Sequence[StitchedChapter], pieces: Sequence[AacPiece], frame_counts: Sequence[int]
) -> list[ChapterMark]:
    """Chapter marks of one M4B part, from the AAC frames each piece really occupies: a chapter
    starts where its first piece does."""
    first_piece_starts: dict[int, int] = {}
    for start, piece in zip(chapter_starts(frame_counts), pieces, strict=True):
        first_piece_starts.setdefault(piece.chapter, start)
    starts = [first_piece_starts[index] for index in range(len(chapters))]
    ends = starts[1:] + [playable_samples(frame_counts)]
    return [
        ChapterMark(chapter.title, start, end)
        for chapter, start, end in zip(chapters, starts, ends, strict=True)
    ]


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AssemblyError(f"{path}: cannot write: {exc.strerror} ({os_error_fix(exc)})") from exc

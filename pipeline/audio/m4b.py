"""The M4B: encoded AAC pieces joined into one file with tags, QuickTime + Nero chapters, the cover,
``stik`` = audiobook, brand ``M4B ``, the book's language on the audio and chapter tracks, and its
index (``moov``) first, so that a player or a web server can start it before it has the whole file.

Written here rather than by ffmpeg's mux: every AAC frame's size is known once its piece is encoded
(:mod:`pipeline.audio.aac_frames`), so the index is built first (:mod:`pipeline.audio.mp4_boxes`)
and the frames follow, each piece copied by the kernel to its place, several at once. What is left after the last
sentence is the last pieces' encoding and that copy: ffmpeg took 13 s for a 25.8-hour book's 2.2
million frames on one core, packet by packet. The layout follows ffmpeg's ``-f ipod`` output, and
the tests read the file back with ffprobe, ffmpeg and mutagen.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np

from pipeline.audio.aac import FRAME, PRIMING, AacPiece, chapter_starts, playable_samples
from pipeline.audio.aac_frames import AacFrames, copy_frames, read_frames
from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.languages import container_language
from pipeline.audio.mp4_boxes import AudioTrack, ChapterTrack, chapter_samples, file_type, movie
from pipeline.audio.mp4tags import tag_items
from pipeline.audio.publish import partial_path, publish
from pipeline.audio.stitch import StitchedChapter
from pipeline.audio.tags import TrackTags
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE

# The brand audiobook players (Apple Books among them) file a book under; "M4A " is music.
M4B_BRAND = b"M4B "
COPY_THREADS = 8  # pieces copied into the M4B at once


@dataclass(frozen=True)
class ChapterMark:
    """One chapter marker, in samples of the book's sample rate (exact, no rounding drift)."""

    title: str
    start: int
    end: int


def mux_m4b(
    chapters: Sequence[StitchedChapter],
    pieces: Sequence[AacPiece],
    aac_paths: Sequence[Path],
    frame_counts: Sequence[int],
    tags: TrackTags,
    final_path: Path,
    cover_path: Path | None,
) -> Path:
    """Join encoded pieces (frames files) into one M4B with tags, chapter marks and cover, its
    index first (no re-encoding).

    Raises:
        AssemblyError: a piece is damaged, or the disk is full; no file is left under the final name.
    """
    try:
        frames = [read_frames(path) for path in aac_paths]
    except (OSError, ValueError) as exc:
        raise AssemblyError(f"{final_path}: an encoded piece cannot be read ({exc}); run the assembly again") from exc
    if [piece.count for piece in frames] != list(frame_counts):
        raise AssemblyError(f"{final_path}: the encoded pieces changed since they were counted; run the assembly again")
    marks = m4b_marks(chapters, pieces, frame_counts)
    cover = cover_path.read_bytes() if cover_path is not None else None
    brand = M4B_BRAND if final_path.suffix.lower() == ".m4b" else b"M4A "
    partial = partial_path(final_path)
    try:
        with open(partial, "wb") as out:
            write_m4b(out, frames, marks, tags, cover, brand)
    except OSError as exc:
        remove_quietly(partial)
        raise AssemblyError(f"{final_path}: cannot write it: {exc.strerror} ({os_error_fix(exc)})") from exc
    except BaseException:
        remove_quietly(partial)
        raise
    return publish(partial, final_path)


def write_m4b(out: BinaryIO, frames: Sequence[AacFrames], marks: Sequence[ChapterMark], tags: TrackTags,
              cover: bytes | None, brand: bytes) -> None:
    """``ftyp``, ``moov``, then ``mdat``: the chapter titles, then every piece's frames."""
    language = container_language(tags.language)
    titles = b"".join(chapter_samples([mark.title for mark in marks]))
    mdat_header = _mdat_header(len(titles) + sum(piece.frame_bytes for piece in frames))
    header = file_type(brand)
    audio = AudioTrack(sample_rate=SAMPLE_RATE, config=frames[0].config,
                       sizes=np.concatenate([piece.sizes for piece in frames]), frame=FRAME,
                       priming=PRIMING, language=language, offset=len(titles))
    chapters = ChapterTrack(titles=[mark.title for mark in marks], starts_ms=[_ms(m.start) for m in marks],
                            end_ms=_ms(marks[-1].end), language=language, offset=0) if marks else None
    items = tag_items(tags, cover)
    # the index's size does not depend on where the data starts (32-bit chunk offsets, one chunk
    # each): measured with the offsets relative to the data, then written with them in place
    data_at = len(header) + len(movie(audio, chapters, items)) + len(mdat_header)
    placed_chapters = replace(chapters, offset=data_at) if chapters is not None else None
    index = movie(replace(audio, offset=data_at + len(titles)), placed_chapters, items)
    out.write(header + index + mdat_header + titles)
    out.flush()
    starts = out.tell() + np.cumsum([0] + [piece.frame_bytes for piece in frames[:-1]], dtype=np.int64)
    # copied several at once: one kernel copy at a time moved a 25.7-hour book's 740 MB in ~1.7 s
    # on an H200 host, the last thing before its M4B was done
    with ThreadPoolExecutor(max_workers=min(COPY_THREADS, len(frames)), thread_name_prefix="m4b-copy") as pool:
        for copied in [pool.submit(copy_frames, piece, out, int(at)) for piece, at in zip(frames, starts)]:
            copied.result()


def _mdat_header(payload: int) -> bytes:
    """``mdat``'s header for ``payload`` bytes: a 64-bit size where the box is 4 GiB or more."""
    if payload + 8 < 2**32:
        return (payload + 8).to_bytes(4, "big") + b"mdat"
    return (1).to_bytes(4, "big") + b"mdat" + (payload + 16).to_bytes(8, "big")


def _ms(samples: int) -> int:
    return round(samples * 1000 / SAMPLE_RATE)


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

"""Chapters assembled ahead: measured, stitched and encoded for the M4B while the rest of the book
is still being spoken, so that after the last sentence only the last chapters are left to do.

A book's first chapters, once every sentence of theirs is written, go through the same steps as
in :func:`pipeline.audio.assemble.assemble_audiobook` — laid out and measured, levelled (each
chapter on its own: :func:`pipeline.audio.export.chapter_loudness`), stitched into the work
directory, cut into M4B pieces and encoded — and the assembly after the last batch takes them as
they are. Only a *prefix* of the book is prepared, chapters in reading order: a piece's AAC plan
depends on every piece before it in the M4B (``aac.plan_chapters``), so a chapter is prepared
only once all chapters before it are. The last chapter is left to the assembly, which knows where
the M4B ends. With ``split_hours`` (several M4B files) only the measuring and stitching are done
ahead for the M4B. The other outputs are made from the same prepared chapters: each chapter's
file in every per-chapter format (MP3, Ogg, FLAC, WAV: encoded and tagged in the work directory,
moved into place by the assembly) and its audio for a read-along EPUB; the subtitles and the
read-along text need only the chapters' measures.

Where the chapters are prepared by one process and assembled by another (a CPU worker's tasks),
what was prepared is kept beside them in the work directory (``save_prepared``/``load_prepared``).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.audio.aac import AacChapterPlan, AacPiece, cut_into_pieces, plan_chapters
from pipeline.audio.assembly_types import AssemblyOptions, ChapterAudio
from pipeline.audio.export import (
    Loudness,
    chapter_loudness,
    encode_chapter_file,
    encode_m4b_piece,
    encode_readalong_audio,
)
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter, measure_chapter, stitch_chapter
from pipeline.audio.stitch_helpers import run_per_chapter
from pipeline.audio.tags import TrackTags, track_tags
from pipeline.types import SAMPLE_RATE, BookMetadata

log = logging.getLogger(__name__)

MIN_PIECE_SECONDS = 120.0  # an encode shorter than this pays more for its ffmpeg start than it gains
PREPARED_FILE = "prepared.pickle"  # in the work directory: the chapters prepared there so far
ENCODE_NICENESS = 10  # ffmpeg and stitch helpers beside the GPU yield to the threads that feed it
# Left to the threads that feed the GPU and write and measure its sentences. The encoders run
# niced below them, so more of them only take cores those leave idle: with four kept, the 16-core
# H200 host had 11 of 16 cores busy while a 25.8-hour book was spoken, and its preparation lagged
# the speaking by a stretch.
RESERVED_CORES = 2


def encode_threads() -> int:
    """Encoders beside the GPU: every core but the few that the GPU's feeding, writing and
    measuring threads need."""
    return max(1, worker_count(0) - RESERVED_CORES)


@dataclass(frozen=True)
class PreparedChapter:
    """One chapter assembled ahead, and what it was made from."""

    audio: ChapterAudio  # its sentences as they were when prepared (the assembly checks them)
    measured: MeasuredChapter
    loudness: Loudness
    stitched: StitchedChapter
    pieces: tuple[AacPiece, ...] = ()  # its M4B pieces (``chapter`` = its position in the book)
    plans: tuple[AacChapterPlan, ...] = ()
    aac_paths: tuple[Path, ...] = ()
    frames: tuple[int, ...] = ()  # AAC frames each piece came to
    files: tuple[tuple[str, Path], ...] = ()  # (format, its finished file in the work directory)
    tags: TrackTags | None = None  # what those files are tagged with (the cover left out)
    readalong: Path | None = None  # its audio for a read-along EPUB
    stamps: tuple[tuple[int, int, int], ...] = ()  # its sentence files' (inode, mtime_ns, size) then

    @property
    def encoded(self) -> bool:
        return bool(self.pieces)

    def file_for(self, audio_format: str, tags: TrackTags) -> Path | None:
        """Its file in ``audio_format``, where one was made with these ``tags`` and is still there."""
        made = dict(self.files).get(audio_format)
        same_tags = self.tags is not None and self.tags == replace(tags, cover=None)
        return made if made is not None and same_tags and made.is_file() else None


def sentence_stamps(chapter: ChapterAudio) -> tuple[tuple[int, int, int], ...]:
    """Each sentence file's inode, modification time and size: a sentence spoken again into the
    same path (a retried batch; written to a new file, renamed into place) changes them."""
    stamps = []
    for sentence in chapter.sentences:
        try:
            stat = os.stat(sentence.path)
        except OSError:
            stamps.append((-1, -1, -1))
            continue
        stamps.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


def readalong_audio_path(work_dir: Path, position: int) -> Path:
    """Where the chapter at ``position`` is encoded for a read-along EPUB."""
    return work_dir / "readalong" / f"chapter_{position + 1:04d}.m4a"


def chapter_file_path(work_dir: Path, position: int, audio_format: str) -> Path:
    """Where the chapter at ``position`` is encoded as a per-chapter file ahead of the assembly."""
    return work_dir / "files" / f"chapter_{position + 1:04d}.{audio_format}"


def chapter_wav_path(work_dir: Path, position: int) -> Path:
    """Where the chapter at ``position`` (0-based, in the book's order) is stitched."""
    return work_dir / f"chapter_{position + 1:04d}.wav"


def chapter_pause(options: AssemblyOptions, position: int, chapters: int) -> int:
    """The pause after the chapter at ``position``: the chapter pause, but none after the last."""
    return options.chapter_pause_ms if position < chapters - 1 else 0


def piece_samples(total_samples: int, options: AssemblyOptions) -> int:
    """How long an M4B encode piece should be: four per encoding thread, so that the longest-first
    pool ends evenly (one AAC encode runs on one core at ~150x real time), and never very short."""
    return max(round(MIN_PIECE_SECONDS * SAMPLE_RATE), math.ceil(total_samples / (4 * worker_count(options.threads))))


class BookAhead:
    """The chapters of one book prepared so far (a prefix, in reading order).

    Args:
        work_dir: the book's work directory (the assembly's, later).
        options: the assembly options the book will be assembled with.
        chapters: how many chapters the book has.
        expected_samples: about how long the whole book will be, for the M4B piece length (the
            assembly cuts the rest of the book to its own measure; pieces need not all be equal).
        nice: the encoders' lower priority (beside a GPU's feeding threads).
        metadata: what per-chapter files are tagged with; without it none is made ahead.
    """

    def __init__(self, work_dir: Path, options: AssemblyOptions, chapters: int, expected_samples: int,
                 nice: int = 0, prepared: Sequence[PreparedChapter] = (),
                 metadata: BookMetadata | None = None) -> None:
        self.work_dir, self.options, self.chapters, self.nice = work_dir, options, chapters, nice
        self.metadata = metadata
        self.encodes = "m4b" in options.formats and options.split_hours is None
        self.piece = piece_samples(expected_samples, options)
        self.prepared: list[PreparedChapter] = list(prepared)  # ``prepared``: what an earlier task made
        # every prepared piece's length and trailing silence, in order (the next pieces' AAC plans)
        self._lengths: list[int] = [p.samples for c in self.prepared for p in c.pieces]
        self._silences: list[int] = [p.trailing_silence for c in self.prepared for p in c.pieces]

    @property
    def next_position(self) -> int:
        """The position of the first chapter not prepared yet."""
        return len(self.prepared)

    def prepare(self, chapters: Sequence[ChapterAudio]) -> None:
        """Prepare ``chapters``, the book's next ones in reading order (never its last)."""
        first = self.next_position
        if not chapters or first + len(chapters) >= self.chapters:
            raise ValueError(f"chapters {first}..{first + len(chapters) - 1} of {self.chapters} cannot be "
                             "prepared ahead (in order, and never the last)")
        began = time.monotonic()
        stamps = [sentence_stamps(c) for c in chapters]  # before reading: a later rewrite shows
        self.work_dir.mkdir(parents=True, exist_ok=True)
        measured = run_per_chapter([
            (len(c.sentences), f"measuring chapter {c.index + 1} ({c.title!r})", measure_chapter,
             (c, self.options, chapter_pause(self.options, first + i, self.chapters)))
            for i, c in enumerate(chapters)], self.options)
        stitched = run_per_chapter([
            (len(m.sentences), f"stitching chapter {m.index + 1}", stitch_chapter,
             (m, chapter_wav_path(self.work_dir, first + i)))
            for i, m in enumerate(measured)], self.options)
        loudness = [chapter_loudness(m, self.options) for m in measured]
        laid_out = time.monotonic()
        self.prepared += [replace(c, stamps=stamp) for c, stamp in
                          zip(self._encoded(chapters, measured, loudness, stitched, first), stamps, strict=True)]
        # the split says whether the encodes (in parallel) or the steps before them bound a stretch
        log.info("%d chapter(s) assembled ahead (%d-%d of %d) in %.1f s (measured and stitched in %.1f s)",
                 len(chapters), first + 1, first + len(chapters), self.chapters, time.monotonic() - began,
                 laid_out - began)

    def _encoded(self, chapters: Sequence[ChapterAudio], measured: Sequence[MeasuredChapter],
                 loudness: Sequence[Loudness], stitched: Sequence[StitchedChapter],
                 first: int) -> list[PreparedChapter]:
        """Every encode of these chapters in one pool (M4B pieces, chapter files, read-along
        audio), heaviest first; the chapters as prepared."""
        pieces = self._pieces(stitched, first) if self.encodes else []
        plans = plan_chapters(self._lengths, self._silences, ends_part=False)[-len(pieces):] if pieces else []
        paths = [self.work_dir / f"ahead_{p.chapter + 1:04d}_{p.start}.aac" for p in pieces]
        encodes = [(p.samples, bind(encode_m4b_piece, stitched[p.chapter - first], p, plan, path,
                                    loudness[p.chapter - first], self.options.bitrate, self.nice))
                   for p, plan, path in zip(pieces, plans, paths, strict=True)]
        files = [self._files(s, t, first + i, encodes) for i, (s, t) in enumerate(zip(stitched, loudness))]
        results = run_longest_first(encodes, self.options.threads)
        frames = results[:len(pieces)]
        done = []
        for i, (audio, m, t, s) in enumerate(zip(chapters, measured, loudness, stitched, strict=True)):
            mine = [k for k, p in enumerate(pieces) if p.chapter == first + i]
            made, tags, readalong = files[i]
            done.append(PreparedChapter(audio, m, t, s, tuple(pieces[k] for k in mine), tuple(plans[k] for k in mine),
                                        tuple(paths[k] for k in mine), tuple(frames[k] for k in mine),
                                        made, tags, readalong))
        return done

    def _pieces(self, stitched: Sequence[StitchedChapter], first: int) -> list[AacPiece]:
        """The M4B pieces of these chapters (``chapter`` = position in the book), counted into
        the book's pieces so far (the next chapters' AAC plans depend on them)."""
        pieces = [AacPiece(first + piece.chapter, piece.start, piece.samples, piece.trailing_silence)
                  for piece in cut_into_pieces([s.samples for s in stitched], [s.trailing_silence for s in stitched],
                                               [s.cut_points for s in stitched], self.piece)]
        self._lengths += [p.samples for p in pieces]
        self._silences += [p.trailing_silence for p in pieces]
        return pieces

    def _files(self, chapter: StitchedChapter, loudness: Loudness, position: int,
               encodes: list[tuple[int, Callable[[], object]]]
               ) -> tuple[tuple[tuple[str, Path], ...], TrackTags | None, Path | None]:
        """Add the encodes of the chapter's per-chapter files and read-along audio to ``encodes``;
        where they will be, and the tags the files get."""
        made, tags, readalong = [], None, None
        formats = self.options.chapter_formats if self.metadata is not None else ()
        if formats:
            tags = track_tags(self.metadata, self.options.narrator, chapter.title, position + 1, self.chapters)
        for audio_format in formats:
            path = chapter_file_path(self.work_dir, position, audio_format)
            path.parent.mkdir(parents=True, exist_ok=True)
            encodes.append((chapter.samples, bind(encode_chapter_file, chapter, audio_format, tags, path, loudness,
                                                  self.options.bitrate, self.nice)))
            made.append((audio_format, path))
        if self.options.readalong_audio:
            readalong = readalong_audio_path(self.work_dir, position)
            readalong.parent.mkdir(parents=True, exist_ok=True)
            encodes.append((chapter.samples, bind(encode_readalong_audio, chapter, readalong, loudness,
                                                  self.options.bitrate, self.nice)))
        return tuple(made), replace(tags, cover=None) if tags is not None else None, readalong


def still_the_same(chapters: Sequence[ChapterAudio], prepared: Sequence[PreparedChapter]) -> list[PreparedChapter]:
    """The longest prefix of ``prepared`` made of the same sentences as the chapters now are, their
    files unchanged since (a chapter spoken again since, say by a retried batch, is assembled
    anew, and so is every one after it)."""
    same = []
    for chapter, ahead in zip(chapters, prepared):
        files = (ahead.stitched.wav_path, *ahead.aac_paths, *(() if ahead.readalong is None else (ahead.readalong,)))
        if ahead.audio != chapter or ahead.stamps != sentence_stamps(chapter) or \
                not all(path.is_file() for path in files):
            break
        same.append(ahead)
    return same


def save_prepared(work_dir: Path, prepared: Sequence[PreparedChapter]) -> None:
    """Keep the list of chapters prepared in ``work_dir`` there, for the process that assembles the
    book. Written whole or not at all (renamed into place): a reader never sees half a list."""
    partial = work_dir / f".{PREPARED_FILE}.{os.getpid()}"
    partial.write_bytes(pickle.dumps(list(prepared), protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(partial, work_dir / PREPARED_FILE)


def load_prepared(work_dir: Path) -> list[PreparedChapter]:
    """The chapters ``save_prepared`` kept in ``work_dir`` (none when there is no list or it cannot
    be read: the assembly then does every chapter itself). The file is the project's own, written
    in this data directory by its own workers, never taken from a book."""
    try:
        prepared = pickle.loads((work_dir / PREPARED_FILE).read_bytes())
    except FileNotFoundError:
        return []
    except Exception as exc:  # noqa: BLE001 - an unreadable list only costs the chapters' redoing
        log.warning("%s: the chapters prepared ahead could not be read (%s); assembling them anew",
                    work_dir, exc)
        return []
    return [c for c in prepared if isinstance(c, PreparedChapter)] if isinstance(prepared, list) else []

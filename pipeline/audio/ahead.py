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

What a chapter prepared is, and how a list of them is kept for another process and checked
again, is :mod:`pipeline.audio.prepared`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from pipeline.audio.aac import AacPiece, cut_into_pieces, plan_chapters
from pipeline.audio.assembly_types import AssemblyOptions, ChapterAudio
from pipeline.audio.export import (
    chapter_loudness,
    encode_chapter_file,
    encode_m4b_piece,
    encode_readalong_audio,
)
from pipeline.audio.levelling import Loudness
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.audio.prepared import LaidOut, PreparedChapter, save_under_way, sentence_stamps
from pipeline.audio.stitch import StitchedChapter, measure_chapter, stitch_chapter
from pipeline.audio.stitch_helpers import run_per_chapter
from pipeline.audio.tags import TrackTags, track_tags
from pipeline.types import SAMPLE_RATE, BookMetadata

log = logging.getLogger(__name__)

MIN_PIECE_SECONDS = 120.0  # an encode shorter than this pays more for its ffmpeg start than it gains
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
    """How long the M4B encode pieces of ``total_samples`` (what one pool encodes: the book's
    rest at the end, a stretch ahead) should be: four per encoding thread, so that the
    longest-first pool ends evenly (one AAC encode runs on one core at ~150-300x real time), and
    never very short."""
    return max(round(MIN_PIECE_SECONDS * SAMPLE_RATE), math.ceil(total_samples / (4 * worker_count(options.threads))))


class BookAhead:
    """The chapters of one book prepared so far (a prefix, in reading order).

    Args:
        work_dir: the book's work directory (the assembly's, later).
        options: the assembly options the book will be assembled with.
        chapters: how many chapters the book has.
        nice: the encoders' lower priority (beside a GPU's feeding threads).
        metadata: what per-chapter files are tagged with; without it none is made ahead.
    """

    def __init__(self, work_dir: Path, options: AssemblyOptions, chapters: int, nice: int = 0,
                 prepared: Sequence[PreparedChapter] = (), metadata: BookMetadata | None = None) -> None:
        self.work_dir, self.options, self.chapters, self.nice = work_dir, options, chapters, nice
        self.metadata = metadata
        self.encodes = "m4b" in options.formats and options.split_hours is None
        self.prepared: list[PreparedChapter] = list(prepared)  # ``prepared``: what an earlier task made
        # every prepared piece's length and trailing silence, in order (the next pieces' AAC plans)
        self._lengths: list[int] = [p.samples for c in self.prepared for p in c.pieces]
        self._silences: list[int] = [p.trailing_silence for c in self.prepared for p in c.pieces]
        self._laid_out = len(self.prepared)

    @property
    def next_position(self) -> int:
        """The position of the first chapter not prepared yet."""
        return len(self.prepared)

    @property
    def next_to_lay_out(self) -> int:
        """The position of the first chapter not laid out yet (ahead of ``next_position`` while a
        stretch laid out is being encoded)."""
        return self._laid_out

    def prepare(self, chapters: Sequence[ChapterAudio]) -> None:
        """Prepare ``chapters``, the book's next ones in reading order (never its last)."""
        stretch = self.lay_out(chapters)
        assert stretch is not None  # nothing says stop
        self.encode(stretch)

    def lay_out(self, chapters: Sequence[ChapterAudio],
                keep_going: Callable[[], bool] = lambda: True) -> LaidOut | None:
        """The steps of ``chapters`` (the next ones to lay out, never the book's last) before their
        encodes: measured, stitched, levelled, cut into M4B pieces with their AAC plans. The next
        stretch may be laid out while this one is encoded (``encode``, in the same order). None,
        nothing stitched, when ``keep_going`` says no once they are measured (the book's speaking
        ended: its assembly stitches them, and would wait for these stitches only to drop them)."""
        first = self._laid_out
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
        if not keep_going():
            return None
        stitched = run_per_chapter([
            (len(m.sentences), f"stitching chapter {m.index + 1}", stitch_chapter,
             (m, chapter_wav_path(self.work_dir, first + i)))
            for i, m in enumerate(measured)], self.options)
        pieces = self._pieces(stitched, first) if self.encodes else []
        plans = plan_chapters(self._lengths, self._silences, ends_part=False)[-len(pieces):] if pieces else []
        self._laid_out = first + len(chapters)
        return LaidOut(first, tuple(chapters), tuple(stamps), tuple(measured),
                       tuple(chapter_loudness(m, self.options) for m in measured), tuple(stitched),
                       tuple(pieces), tuple(plans), began, time.monotonic() - began)

    def encode(self, stretch: LaidOut) -> None:
        """Every encode of a stretch laid out (M4B pieces, chapter files, read-along audio) in one
        pool, heaviest first; its chapters join ``prepared``. Stretches in the order laid out."""
        first, pieces, plans = stretch.first, stretch.pieces, stretch.plans
        if first != self.next_position:
            raise ValueError(f"chapters from {first} on are encoded after {self.next_position}: in order only")
        self.say_under_way(stretch)
        paths = [self.work_dir / f"ahead_{p.chapter + 1:04d}_{p.start}.aac" for p in pieces]
        encodes = [(p.samples, bind(encode_m4b_piece, stretch.stitched[p.chapter - first], p, plan, path,
                                    stretch.loudness[p.chapter - first], self.options.bitrate, self.nice))
                   for p, plan, path in zip(pieces, plans, paths, strict=True)]
        files = [self._files(s, t, first + i, encodes)
                 for i, (s, t) in enumerate(zip(stretch.stitched, stretch.loudness))]
        frames = run_longest_first(encodes, self.options.threads)[:len(pieces)]
        for i, (audio, m, t, s) in enumerate(zip(stretch.chapters, stretch.measured, stretch.loudness,
                                                 stretch.stitched, strict=True)):
            mine = [k for k, p in enumerate(pieces) if p.chapter == first + i]
            made, tags, readalong = files[i]
            self.prepared.append(PreparedChapter(
                audio, m, t, s, tuple(pieces[k] for k in mine), tuple(plans[k] for k in mine),
                tuple(paths[k] for k in mine), tuple(frames[k] for k in mine), made, tags, readalong,
                stretch.stamps[i]))
        # the split says whether the encodes or the steps before them bound a stretch
        log.info("%d chapter(s) assembled ahead (%d-%d of %d) in %.1f s (laid out in %.1f s)",
                 len(stretch.chapters), first + 1, first + len(stretch.chapters), self.chapters,
                 time.monotonic() - stretch.began, stretch.laid_out_seconds)

    def say_under_way(self, stretch: LaidOut) -> None:
        """Say in the work directory that ``stretch``, the next to be prepared, is being encoded,
        and every M4B piece up to its end (``prepared.save_under_way``)."""
        pieces = [p for c in self.prepared for p in c.pieces] + list(stretch.pieces) if self.encodes else None
        save_under_way(self.work_dir, stretch.first + len(stretch.chapters), pieces)

    def _pieces(self, stitched: Sequence[StitchedChapter], first: int) -> list[AacPiece]:
        """The M4B pieces of these chapters (``chapter`` = position in the book), counted into
        the book's pieces so far (the next chapters' AAC plans depend on them). Cut to the
        stretch's own length (pieces need not all be equal): cut to an estimate of a wave from the
        sentences' caps (twice their expected length), a 25.7-hour book's stretches of 8 chapters
        were 32 pieces on 14 threads, the last of three rounds on 4 of them, ~10 cores busy."""
        length = piece_samples(sum(s.samples for s in stitched), self.options)
        pieces = [AacPiece(first + piece.chapter, piece.start, piece.samples, piece.trailing_silence)
                  for piece in cut_into_pieces([s.samples for s in stitched], [s.trailing_silence for s in stitched],
                                               [s.cut_points for s in stitched], length)]
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

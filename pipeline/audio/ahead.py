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
ahead.

Where the chapters are prepared by one process and assembled by another (a CPU worker's tasks),
what was prepared is kept beside them in the work directory (``save_prepared``/``load_prepared``).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.audio.aac import AacChapterPlan, AacPiece, cut_into_pieces, plan_chapters
from pipeline.audio.assembly_types import AssemblyOptions, ChapterAudio
from pipeline.audio.export import Loudness, chapter_loudness, encode_m4b_piece
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter, measure_chapter, stitch_chapter
from pipeline.audio.stitch_helpers import run_per_chapter
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

MIN_PIECE_SECONDS = 120.0  # an encode shorter than this pays more for its ffmpeg start than it gains
PREPARED_FILE = "prepared.pickle"  # in the work directory: the chapters prepared there so far


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

    @property
    def encoded(self) -> bool:
        return bool(self.pieces)


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
    """

    def __init__(self, work_dir: Path, options: AssemblyOptions, chapters: int, expected_samples: int,
                 nice: int = 0, prepared: Sequence[PreparedChapter] = ()) -> None:
        self.work_dir, self.options, self.chapters, self.nice = work_dir, options, chapters, nice
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
        if not self.encodes:
            self.prepared += [PreparedChapter(a, m, t, s) for a, m, t, s in zip(chapters, measured, loudness, stitched)]
            return
        self.prepared += self._encoded(chapters, measured, loudness, stitched, first)
        log.info("%d chapter(s) assembled ahead (%d-%d of %d) in %.1f s", len(chapters), first + 1,
                 first + len(chapters), self.chapters, time.monotonic() - began)

    def _encoded(self, chapters: Sequence[ChapterAudio], measured: Sequence[MeasuredChapter],
                 loudness: Sequence[Loudness], stitched: Sequence[StitchedChapter],
                 first: int) -> list[PreparedChapter]:
        pieces = [AacPiece(first + piece.chapter, piece.start, piece.samples, piece.trailing_silence)
                  for piece in cut_into_pieces([s.samples for s in stitched], [s.trailing_silence for s in stitched],
                                               [s.cut_points for s in stitched], self.piece)]
        self._lengths += [p.samples for p in pieces]
        self._silences += [p.trailing_silence for p in pieces]
        plans = plan_chapters(self._lengths, self._silences, ends_part=False)[-len(pieces):]
        paths = [self.work_dir / f"ahead_{p.chapter + 1:04d}_{p.start}.aac" for p in pieces]
        frames = run_longest_first(
            [(p.samples, bind(encode_m4b_piece, stitched[p.chapter - first], p, plan, path,
                              loudness[p.chapter - first], self.options.bitrate, self.nice))
             for p, plan, path in zip(pieces, plans, paths, strict=True)],
            self.options.threads)
        done = []
        for i, (audio, m, t, s) in enumerate(zip(chapters, measured, loudness, stitched, strict=True)):
            mine = [k for k, p in enumerate(pieces) if p.chapter == first + i]
            done.append(PreparedChapter(audio, m, t, s, tuple(pieces[k] for k in mine), tuple(plans[k] for k in mine),
                                        tuple(paths[k] for k in mine), tuple(frames[k] for k in mine)))
        return done


def still_the_same(chapters: Sequence[ChapterAudio], prepared: Sequence[PreparedChapter]) -> list[PreparedChapter]:
    """The longest prefix of ``prepared`` made of the same sentences as the chapters now are (a
    chapter spoken again since, say after a retry, is assembled anew, and so is every one after it)."""
    same = []
    for chapter, ahead in zip(chapters, prepared):
        files = (ahead.stitched.wav_path, *ahead.aac_paths)
        if ahead.audio != chapter or not all(path.is_file() for path in files):
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

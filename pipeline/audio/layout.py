"""A book laid out for its assembly: every chapter measured (from its sentences' measures) and,
where its outputs need it whatever the loudness, stitched into one WAV in the work directory; the
chapters prepared ahead (:mod:`pipeline.audio.ahead`) taken as they are.

A preparation may still be encoding a stretch of chapters when the assembly begins (the last
sentence came while it ran: on an H200 host the shelf's last book waited 2.8 s for it, then spent
1.8 s measuring and stitching its last four chapters). The chapters after that stretch do not
depend on it until their M4B pieces are planned, so when ``prepared`` is a callable they are laid
out first, beside its encodes, and the preparation is waited for only then. The stretch's end is
what the preparation wrote in the work directory as it began encoding it (``prepared.under_way``);
a preparation that then fails leaves its chapters to be laid out after the wait, as before.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.audio.ahead import chapter_pause, chapter_wav_path
from pipeline.audio.assembly_types import AssemblyOptions, ChapterAudio
from pipeline.audio.early_m4b import EarlyM4b, encode_early
from pipeline.audio.failures import make_dirs, remove_quietly
from pipeline.audio.outputs import stitched_whatever_the_loudness
from pipeline.audio.prepared import PreparedChapter, still_the_same, under_way
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter, measure_chapter, stitch_chapter
from pipeline.audio.stitch_helpers import run_per_chapter

TakePrepared = Callable[[], Sequence[PreparedChapter]]  # the chapters prepared ahead, once their preparation ends
# where the assembly stitches its own chapters while a preparation may still write in the work
# directory (the stretch it laid out but will not encode is at the same positions)
REST_DIR = "rest"


@dataclass(frozen=True)
class BookLaidOut:
    ahead: list[PreparedChapter]  # the chapters prepared ahead that still hold (a prefix)
    measured: list[MeasuredChapter]  # every chapter
    stitched: list[StitchedChapter] | None  # every chapter; None: those not ahead are not stitched yet
    early: int  # chapters laid out while a preparation was still under way
    waited: float = 0.0  # seconds spent waiting for it after that
    early_m4b: EarlyM4b | None = None  # their M4B pieces, being encoded meanwhile


def lay_out_book(chapters: Sequence[ChapterAudio], options: AssemblyOptions, work_dir: Path,
                 prepared: Sequence[PreparedChapter] | TakePrepared) -> BookLaidOut:
    """Every chapter measured, the chapters ``prepared`` ahead taken where they still hold; with
    ``prepared`` a callable, the chapters after a stretch still being prepared are measured,
    stitched (``stitched_whatever_the_loudness``) and their M4B pieces' encodes begun
    (:mod:`pipeline.audio.early_m4b`) before it is called."""
    if not callable(prepared):
        ahead = still_the_same(chapters, prepared)
        return BookLaidOut(ahead, [p.measured for p in ahead] + measure_book(chapters, options, len(ahead)),
                           None, 0)
    rest_dir = work_dir / REST_DIR
    stitch = stitched_whatever_the_loudness(options)
    make_dirs(rest_dir)
    start = min(under_way(work_dir), len(chapters))
    early = measure_book(chapters, options, start)
    early_stitched = stitch_book(early, rest_dir, options, start) if stitch else []
    early_m4b = encode_early(work_dir, options, start, early, early_stitched) if stitch else None
    waiting = time.monotonic()
    try:
        ahead = still_the_same(chapters, prepared())
    except BaseException:
        if early_m4b is not None:
            early_m4b.finish()
        raise
    waited = time.monotonic() - waiting
    if not ahead:  # nothing of the work directory is taken: its space back, once nothing writes there
        if early_m4b is not None:  # planned after pieces that are not kept: encoded again
            early_m4b.finish()
            early_m4b = None
        clear_work_dir(work_dir)
    taken = len(ahead)
    if taken >= start:  # the stretch under way kept (or one more begun as the speaking ended)
        gap: list[MeasuredChapter] = []
        early, early_stitched = early[taken - start:], early_stitched[taken - start:]
    else:  # it failed, or what was kept no longer holds: those chapters are laid out now
        gap = measure_book(chapters, options, taken, start)
        early_stitched = (stitch_book(gap, rest_dir, options, taken) if stitch else []) + early_stitched
    measured = [p.measured for p in ahead] + gap + early
    stitched = [p.stitched for p in ahead] + early_stitched if stitch else None
    return BookLaidOut(ahead, measured, stitched, len(early), waited, early_m4b)


def measure_book(chapters: Sequence[ChapterAudio], options: AssemblyOptions, first: int = 0,
                 end: int | None = None) -> list[MeasuredChapter]:
    """Lay out and measure the chapters at positions ``first`` to ``end`` (exclusive; default:
    the last) with the chapter pause after all but the book's last, in helper processes, one
    per core (:mod:`pipeline.audio.stitch_helpers`), unless ``options.stitch_in_processes`` is
    off, the book short, or there is one chapter or core: then in threads."""
    calls = [
        (len(chapter.sentences), f"measuring chapter {chapter.index + 1} ({chapter.title!r})", measure_chapter,
         (chapter, options, chapter_pause(options, position, len(chapters))))
        for position, chapter in enumerate(chapters[:end]) if position >= first
    ]
    return run_per_chapter(calls, options)


def stitch_book(chapters: Sequence[MeasuredChapter], work_dir: Path, options: AssemblyOptions,
                first: int = 0) -> list[StitchedChapter]:
    """Write the WAV of each of ``chapters``, the book's from position ``first`` on, into
    ``work_dir`` for the encoders (as :func:`measure_book`)."""
    calls = [
        (len(chapter.sentences), f"stitching chapter {chapter.index + 1} into {path}", stitch_chapter,
         (chapter, path))
        for position, chapter in enumerate(chapters, start=first)
        for path in [chapter_wav_path(work_dir, position)]
    ]
    return run_per_chapter(calls, options)


def clear_work_dir(work_dir: Path) -> None:
    """Everything in ``work_dir`` but what the assembly stitches there itself (``REST_DIR``):
    what an earlier attempt left (nothing of it is taken), or a preparation's own start."""
    for entry in work_dir.iterdir() if work_dir.is_dir() else ():
        if entry.name == REST_DIR:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            remove_quietly(entry)

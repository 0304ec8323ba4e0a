"""The M4B pieces of the chapters after a stretch still being prepared, encoded beside it.

An assembly that begins while a preparation ahead encodes a stretch lays out the chapters after
it first (:mod:`pipeline.audio.layout`). Their M4B pieces' AAC plans depend only on the lengths of
every piece before them, and the preparation said those as it began encoding the stretch
(``prepared.under_way_pieces``): so these chapters are encoded then too, on every core, beside the
stretch's own encodes (niced below them), instead of after them. The M4B takes them only if the
chapters prepared ahead come to exactly what was said (the stretch kept, the same pieces); else
they are encoded again, as they always were.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.audio.aac import AacChapterPlan, AacPiece, cut_into_pieces, plan_chapters
from pipeline.audio.ahead import piece_samples
from pipeline.audio.assembly_types import AssemblyOptions
from pipeline.audio.export import chapter_loudness, encode_m4b_piece
from pipeline.audio.outputs import M4bPart
from pipeline.audio.parallel import bind, run_longest_first
from pipeline.audio.prepared import under_way_pieces
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter

log = logging.getLogger(__name__)


def rest_pieces(rest: Sequence[StitchedChapter], first: int, options: AssemblyOptions) -> list[AacPiece]:
    """The M4B pieces of ``rest``, the chapters of one part from position ``first`` on that are
    not encoded ahead, cut from what is left to encode (after the last sentence the last chapters
    are all there is, and every core should have a share of them)."""
    return [replace(p, chapter=p.chapter + first)
            for p in cut_into_pieces([c.samples for c in rest], [c.trailing_silence for c in rest],
                                     [c.cut_points for c in rest],
                                     piece_samples(sum(c.samples for c in rest), options))]


def m4b_piece_path(work_dir: Path, number: int, chapter: StitchedChapter, piece: AacPiece) -> Path:
    """Where the assembly encodes ``piece`` of ``chapter`` for M4B part ``number``."""
    return work_dir / f"part{number:02d}_{chapter.wav_path.stem}_{piece.start}.aac"


@dataclass
class EarlyM4b:
    """The rest's M4B pieces being encoded, and what they were planned after."""

    pieces: tuple[AacPiece, ...]
    plans: tuple[AacChapterPlan, ...]
    paths: tuple[Path, ...]
    frames: Future[list[int]]
    pool: ThreadPoolExecutor

    def fill(self, parts: Sequence[M4bPart]) -> list[M4bPart]:
        """``parts`` with the pieces encoded early as done, where the one part's last pieces are
        exactly these; they are waited for either way (the assembly may encode the same paths)."""
        frames = self.finish()
        if frames is None or len(parts) != 1:
            return list(parts)
        part, count = parts[0], len(self.pieces)
        own = len(part.pieces) - count
        if own < 0 or (part.pieces[own:], part.plans[own:], part.aac_paths[own:]) != \
                (self.pieces, self.plans, self.paths) or any(f is not None for f in part.frames_ahead[own:]):
            log.info("the chapters prepared ahead are not what their preparation said: %d M4B piece(s) "
                     "encoded again", count)
            return list(parts)
        return [replace(part, frames_ahead=part.frames_ahead[:own] + tuple(frames))]

    def finish(self) -> list[int] | None:
        """Their frame counts once every one is encoded; None when one failed (the assembly
        encodes them again and says what is wrong)."""
        try:
            return self.frames.result()
        except Exception as exc:  # noqa: BLE001 - encoded again, where a lasting fault is reported
            log.info("M4B pieces encoded early failed (%s: %s); encoding them again", type(exc).__name__, exc)
            return None
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def encode_early(work_dir: Path, options: AssemblyOptions, first: int, measured: Sequence[MeasuredChapter],
                 stitched: Sequence[StitchedChapter]) -> EarlyM4b | None:
    """Begin encoding the M4B pieces of ``stitched``, the book's chapters from position ``first``
    on, if the preparation under way in ``work_dir`` said the pieces before them (one M4B part
    only); None otherwise."""
    if "m4b" not in options.formats or options.split_hours is not None or not stitched or first == 0:
        return None
    before = under_way_pieces(work_dir, first)
    if before is None:
        return None
    pieces = rest_pieces(stitched, first, options)
    plans = plan_chapters([s for s, _ in before] + [p.samples for p in pieces],
                          [t for _, t in before] + [p.trailing_silence for p in pieces])[len(before):]
    paths = [m4b_piece_path(work_dir, 1, stitched[p.chapter - first], p) for p in pieces]
    loudness = [chapter_loudness(m, options) for m in measured]
    encodes = [(p.samples, bind(encode_m4b_piece, stitched[p.chapter - first], p, plan, path,
                                loudness[p.chapter - first], options.bitrate))
               for p, plan, path in zip(pieces, plans, paths, strict=True)]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-m4b")
    return EarlyM4b(tuple(pieces), tuple(plans), tuple(paths), pool.submit(run_longest_first, encodes, options.threads),
                    pool)

"""Chapter-by-chapter AAC for M4B: encode chapters in parallel, join the frames, keep marks exact.

One ffmpeg AAC encode runs on one core at roughly 150x real time; encoding the chapters
separately (one per core) and concatenating their ADTS frames is what lets a 10-hour book finish
in minutes. Concatenated streams need care with time:

* ffmpeg's AAC encoder puts ``PRIMING`` samples of encoder delay in front of every stream and
  rounds the end up to whole frames, so an encode of ``m`` samples yields ``ceil(m / 1024) + 1``
  frames. The joined stream is muxed with an input offset of ``-PRIMING`` samples, so the M4B gets
  an edit list that hides the first chapter's priming (as a direct encode would); the priming
  frames of later chapters stay and are played as a frame of silence in the chapter pause.
* So each chapter's *input* is cut (or padded) in its trailing pause, which is pure silence, such
  that the next chapter's first sample lands within half a frame of where it lies in the stitched
  timeline. Chapter marks are then placed from the frames actually written, exactly at each
  chapter's first sample: no drift, however many chapters.
* The joins fall inside the chapter pause, so the overlap of two independent streams is silence.

A chapter much longer than a fair share of the book is cut into pieces the same way, each piece
ending in the pause before a sentence (:func:`cut_into_pieces`): a book that is one long chapter
(a plain-text file without headings) or a few would otherwise encode on one core or a few. The
marks are placed at each chapter's first piece.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

FRAME = 1024  # samples per AAC-LC frame
PRIMING = 1024  # ffmpeg's AAC encoder delay, in samples


@dataclass(frozen=True)
class AacChapterPlan:
    """How much of a chapter's PCM to encode (``input_samples``; more than it has = padded silence)."""

    input_samples: int
    expected_frames: int


MIN_CUT_PAUSE = 2 * FRAME  # a piece may end only in a pause at least this long (room for the plan)


@dataclass(frozen=True)
class AacPiece:
    """A stretch of one chapter encoded on its own: samples ``start:start + samples`` of the chapter,
    the last ``trailing_silence`` of them silence that the plan may shorten or pad."""

    chapter: int  # the chapter's position in its M4B part
    start: int
    samples: int
    trailing_silence: int


def cut_into_pieces(
    lengths: Sequence[int],
    trailing_silence: Sequence[int],
    cut_points: Sequence[Sequence[tuple[int, int]]],
    piece_samples: int,
) -> list[AacPiece]:
    """Each chapter as one piece, or, when longer than 1.5 pieces, cut near every ``piece_samples``.

    Args:
        lengths, trailing_silence: of each chapter, as for :func:`plan_chapters`.
        cut_points: per chapter, ``(sample, pause)`` where a sentence's speech starts after a pause
            of ``pause`` samples; a piece may end there (its trailing silence is that pause).
        piece_samples: the length to aim for.
    """
    pieces = []
    chapters = zip(lengths, trailing_silence, cut_points, strict=True)
    for index, (length, silence, points) in enumerate(chapters):
        start = 0
        if length > 1.5 * piece_samples:
            usable = [(sample, pause) for sample, pause in points if pause >= MIN_CUT_PAUSE]
            for target in range(piece_samples, length - piece_samples // 2, piece_samples):
                cut = _nearest(usable, target)
                if cut is None or cut[0] - start < piece_samples // 2 or length - cut[0] < piece_samples // 2:
                    continue
                pieces.append(AacPiece(index, start, cut[0] - start, cut[1]))
                start = cut[0]
        pieces.append(AacPiece(index, start, length - start, silence))
    return pieces


def _nearest(points: Sequence[tuple[int, int]], target: int) -> tuple[int, int] | None:
    """The point (in sample order) whose sample is nearest ``target``."""
    at = bisect.bisect_left(points, (target, 0))
    near = points[max(at - 1, 0):at + 1]
    return min(near, key=lambda point: abs(point[0] - target), default=None)


def frames_for(input_samples: int) -> int:
    """AAC frames ffmpeg produces for ``input_samples`` (priming frame included)."""
    return math.ceil(input_samples / FRAME) + 1


def plan_chapters(lengths: Sequence[int], trailing_silence: Sequence[int],
                  ends_part: bool = True) -> list[AacChapterPlan]:
    """Choose each chapter's encoded length so chapter starts stay on the stitched timeline.

    Args:
        lengths: PCM samples of each chapter of one M4B part, in order.
        trailing_silence: silence at the end of each chapter that may be shortened.
        ends_part: whether the last of them ends the part; False for the first chapters of a part
            planned before the rest exist (each plan depends only on the chapters before it).

    Returns:
        One plan per chapter. The part's last chapter is encoded whole; no chapter loses anything
        but trailing silence.
    """
    plans = []
    encoded_start = 0  # where chapter k's first sample plays in the M4B (see chapter_starts)
    pcm_end = 0  # where chapter k ends in the stitched timeline
    last = len(lengths) - 1 if ends_part else -1
    for position, (length, silence) in enumerate(zip(lengths, trailing_silence, strict=True)):
        pcm_end += length
        if position == last:
            plans.append(AacChapterPlan(input_samples=length, expected_frames=frames_for(length)))
            break
        content = length - silence  # never cut into this
        frames = max(frames_for(content), round((pcm_end - encoded_start) / FRAME))
        plans.append(AacChapterPlan(input_samples=(frames - 1) * FRAME, expected_frames=frames))
        encoded_start += frames * FRAME
    return plans


def chapter_starts(frame_counts: Sequence[int]) -> list[int]:
    """Where each chapter's first sample plays in the M4B, from the frames actually written.

    The stream plays from ``PRIMING`` on (edit list), and chapter k's first sample sits ``PRIMING``
    into its own frames, so it plays at the sum of the earlier chapters' frames.
    """
    starts, encoded_start = [], 0
    for frames in frame_counts:
        starts.append(encoded_start)
        encoded_start += frames * FRAME
    return starts


def playable_samples(frame_counts: Sequence[int]) -> int:
    """The M4B's duration in samples: every frame but the hidden first priming."""
    return sum(frame_counts) * FRAME - PRIMING

"""Where every sentence's speech lies in the finished audio, exact to the sample: in its chapter's
audio (as every per-chapter file holds it), and in the M4B, placed by the same count of AAC frames
that places the M4B's chapter marks (``m4b.m4b_marks``).

The layout of a chapter is the one it was measured and stitched with (``stitch.measure_chapter``):
each sentence's trimmed speech after its pause, the chapter pause last.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.audio.aac import AacPiece, chapter_starts
from pipeline.audio.assembly_types import ChapterTimeline, M4bStretch, SpokenSpan
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter


def chapter_timelines(chapters: Sequence[MeasuredChapter]) -> tuple[ChapterTimeline, ...]:
    """Each chapter's sentences' speech, in the chapter's audio and with the chapters back to back."""
    timelines = []
    book_start = 0
    for chapter in chapters:
        spans = []
        position = 0
        for sentence in chapter.sentences:
            position += sentence.pause
            length = sentence.end - sentence.start
            spans.append(SpokenSpan(sentence.path, position, position + length))
            position += length
        timelines.append(ChapterTimeline(chapter.index, book_start, chapter.samples, tuple(spans)))
        book_start += chapter.samples
    return tuple(timelines)


def m4b_stretches(
    chapters: Sequence[StitchedChapter], pieces: Sequence[AacPiece], frame_counts: Sequence[int], path: Path
) -> list[M4bStretch]:
    """Where each piece of one M4B part plays, from the AAC frames each piece really occupies."""
    return [
        M4bStretch(path, chapters[piece.chapter].index, piece.start, at)
        for piece, at in zip(pieces, chapter_starts(frame_counts), strict=True)
    ]

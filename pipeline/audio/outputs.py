"""What assembly writes besides the M4B's pieces: the per-chapter files (encoded now, or made
ahead and moved into place), the read-along audio's places, the M4B's parts and cover, and the
progress count of the encodes."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pipeline.audio.aac import AacChapterPlan, AacPiece
from pipeline.audio.ahead import readalong_audio_path
from pipeline.audio.assembly_types import AssemblyOptions, AssemblyReport, ChapterReport, OnStep
from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.ffmpeg import image_decodes
from pipeline.audio.gained_wav import write_chapter_wav
from pipeline.audio.levelling import Loudness
from pipeline.audio.names import numbered_names
from pipeline.audio.prepared import PreparedChapter
from pipeline.audio.publish import partial_path, publish
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter
from pipeline.audio.stitch_helpers import run_per_chapter
from pipeline.audio.tags import TrackTags, cover_mime, track_tags
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE, BookMetadata

log = logging.getLogger(__name__)

_Chapter = TypeVar("_Chapter", MeasuredChapter, StitchedChapter)

Treatments = Sequence[Loudness]  # one per chapter, in reading order


def writes_from_sentences(options: AssemblyOptions, loudness: Treatments) -> bool:
    """Whether every output is a WAV chapter without a limiter, written straight from the
    sentences (``gained_wav.write_chapter_wav``): then no chapter is stitched to the work directory."""
    return not stitched_whatever_the_loudness(options) and all(t.limit_dbfs is None for t in loudness)


def stitched_whatever_the_loudness(options: AssemblyOptions) -> bool:
    """Whether the chapters are stitched into the work directory before their loudness is known:
    every output but WAV chapters (and subtitles) is encoded from the stitched chapters."""
    return set(options.formats) - {"srt", "vtt"} != {"wav"}


def write_wav_chapters(
    chapters: Sequence[MeasuredChapter],
    metadata: BookMetadata,
    out_dir: Path,
    options: AssemblyOptions,
    loudness: Treatments,
    ahead: Sequence[PreparedChapter] = (),
) -> list[Path]:
    """Every chapter's final WAV with its gain, from its sentences (as ``measure_book`` does), or
    moved into place where it was written ``ahead``; the paths in reading order."""
    treatment = {chapter.index: t for chapter, t in zip(chapters, loudness, strict=True)}
    files = plan_chapter_files(chapters, metadata, out_dir, options)
    made = made_ahead(files, ahead)
    calls = [
        (len(chapter.sentences), f"writing {final_path}", write_chapter_wav,
         (chapter, tags, final_path, treatment[chapter.index].volume_db))
        for chapter, _, tags, final_path in files if final_path not in made
    ]
    run_per_chapter(calls, options)
    for final_path, path in made.items():
        move_into_place(path, final_path)
    return [final_path for _, _, _, final_path in files]


def made_ahead(files: Sequence[tuple[_Chapter, str, TrackTags, Path]],
               ahead: Sequence[PreparedChapter]) -> dict[Path, Path]:
    """Of the per-chapter ``files`` (``plan_chapter_files``), those made ahead with the same tags:
    final path -> the file made in the work directory."""
    prepared = {chapter.measured.index: chapter for chapter in ahead}
    made = {}
    for chapter, audio_format, tags, final_path in files:
        path = prepared[chapter.index].file_for(audio_format, tags) if chapter.index in prepared else None
        if path is not None:
            made[final_path] = path
    return made


def move_into_place(path: Path, final_path: Path) -> Path:
    """A file finished in the work directory given its final name (copied first where the output
    is on another file system), never seen there half written."""
    partial = partial_path(final_path)
    try:
        try:
            os.replace(path, partial)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            shutil.copyfile(path, partial)
    except OSError as exc:
        remove_quietly(partial)
        raise AssemblyError(f"{final_path}: cannot write it: {exc.strerror} ({os_error_fix(exc)})") from exc
    return publish(partial, final_path)


@dataclass(frozen=True)
class M4bPart:
    """One M4B file to produce: its chapters, the pieces they are encoded in, and its tags."""

    chapters: tuple[StitchedChapter, ...]
    pieces: tuple[AacPiece, ...]  # each chapter whole, or cut where it is long (pipeline/audio/aac.py)
    plans: tuple[AacChapterPlan, ...]  # one per piece
    aac_paths: tuple[Path, ...]  # one per piece
    tags: TrackTags
    final_path: Path
    cover_path: Path | None
    frames_ahead: tuple[int | None, ...] = ()  # per piece: its frames if encoded ahead, else None


def plan_chapter_files(
    stitched: Sequence[_Chapter], metadata: BookMetadata, out_dir: Path, options: AssemblyOptions
) -> list[tuple[_Chapter, str, TrackTags, Path]]:
    """(chapter, format, tags, final path) for every per-chapter file, in format then chapter order."""
    titles = [chapter.title for chapter in stitched]
    files = []
    for audio_format in options.chapter_formats:
        names = numbered_names(titles, audio_format)
        for number, (chapter, name) in enumerate(zip(stitched, names, strict=True), start=1):
            tags = track_tags(metadata, options.narrator, chapter.title, number, len(stitched))
            files.append((chapter, audio_format, tags, options.folder_for(audio_format, out_dir) / name))
    return files


def readalong_audio_paths(stitched: Sequence[StitchedChapter], work_dir: Path) -> list[Path]:
    """Where each chapter's audio for a read-along EPUB is encoded (in ``work_dir``)."""
    (work_dir / "readalong").mkdir(parents=True, exist_ok=True)
    return [readalong_audio_path(work_dir, position) for position in range(len(stitched))]


def split_into_parts(
    stitched: Sequence[StitchedChapter], split_hours: float | None
) -> list[list[StitchedChapter]]:
    """Group whole chapters into parts of at most ``split_hours`` (a longer chapter is a part alone)."""
    if split_hours is None:
        return [list(stitched)]
    limit = split_hours * 3600 * SAMPLE_RATE
    parts: list[list[StitchedChapter]] = [[]]
    length = 0
    for chapter in stitched:
        if parts[-1] and length + chapter.samples > limit:
            parts.append([])
            length = 0
        parts[-1].append(chapter)
        length += chapter.samples
    return parts


def write_cover(metadata: BookMetadata, work_dir: Path) -> Path | None:
    """Save the cover for ffmpeg; None (with a warning) if there is none or ffmpeg cannot read it."""
    if not metadata.cover:
        return None
    extension = "png" if cover_mime(metadata) == "image/png" else "jpg"
    path = work_dir / f"cover.{extension}"
    try:
        path.write_bytes(metadata.cover)
    except OSError as exc:
        raise AssemblyError(f"{path}: cannot write the cover: {exc.strerror} ({os_error_fix(exc)})") from exc
    if not image_decodes(path):
        log.warning(
            "%r: the cover image cannot be decoded; the audiobook is written without a cover", metadata.title
        )
        return None
    return path


_Job = TypeVar("_Job")


def counted(jobs: Sequence[tuple[int, Callable[[], _Job]]], stage: str,
            on_step: OnStep) -> list[tuple[int, Callable[[], _Job]]]:
    """The same ``(weight, job)`` pairs, each telling ``on_step`` ``stage`` k/n as it ends (0/n now)."""
    lock, finished = threading.Lock(), [0]
    on_step(stage, 0, len(jobs))

    def telling(job: Callable[[], _Job]) -> Callable[[], _Job]:
        def run() -> _Job:
            result = job()
            with lock:  # jobs end on several threads; each count is told once, in order
                finished[0] += 1
                on_step(stage, finished[0], len(jobs))
            return result
        return run

    return [(weight, telling(job)) for weight, job in jobs]


def no_step(stage: str, done: int, total: int) -> None:
    return None


def assembly_report(
    stitched: Sequence[MeasuredChapter], outputs: Sequence[Path], loudness: Treatments, measured: float
) -> AssemblyReport:
    """What assembly produced: the files, where every chapter starts, the loudness figures."""
    reports, start = [], 0
    for chapter in stitched:
        reports.append(ChapterReport(chapter.title, start / SAMPLE_RATE, chapter.samples / SAMPLE_RATE))
        start += chapter.samples
    return AssemblyReport(
        outputs=tuple(outputs),
        chapters=tuple(reports),
        total_seconds=start / SAMPLE_RATE,
        sentence_seconds=sum(c.sentence_samples for c in stitched) / SAMPLE_RATE,
        pause_seconds=sum(c.pause_samples for c in stitched) / SAMPLE_RATE,
        gain_db=weighted_gain(stitched, loudness),
        measured_lufs=measured,
        limiter=any(t.limit_dbfs is not None for t in loudness),
    )


def weighted_gain(chapters: Sequence[MeasuredChapter], loudness: Treatments) -> float:
    """The chapters' gains averaged by their length (the report's one figure)."""
    total = sum(chapter.samples for chapter in chapters)
    return sum(c.samples * t.gain_db for c, t in zip(chapters, loudness, strict=True)) / total if total else 0.0

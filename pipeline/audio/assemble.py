"""The assembly stage: sentence WAVs in, finished audiobook files out.

1. Measure: each chapter is laid out from its sentences' measures (speech bounds, loudness,
   peaks; kept beside the sentence WAVs by the GPU worker, or taken now), in helper processes.
2. Decide loudness: the book's integrated loudness from all chapters' measurements gives one gain;
   a limiter is added only if that gain would push peaks past the true-peak ceiling.
3. Write: WAV chapters that need no limiter straight from the sentences with the gain; for
   anything else each chapter is stitched into a WAV in the work directory first, then encoded:
   the M4B (one file, or one per part with ``split_hours``) and/or one file per chapter for each
   other format, each under a temporary name until complete.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from pipeline.audio.aac import AacChapterPlan, AacPiece, cut_into_pieces, plan_chapters
from pipeline.audio.export import (
    Loudness,
    encode_chapter_file,
    encode_m4b_piece,
    encode_readalong_audio,
    mux_m4b,
    write_chapter_wav,
)
from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.ffmpeg import image_decodes
from pipeline.audio.loudness import integrated_lufs
from pipeline.audio.assembly_types import (
    AssemblyOptions,
    AssemblyReport,
    ChapterAudio,
    ChapterReport,
    M4bStretch,
    OnStep,
)
from pipeline.audio.names import numbered_names, safe_stem
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter, measure_chapter, stitch_chapter
from pipeline.audio.stitch_helpers import run_per_chapter
from pipeline.audio.timeline import chapter_timelines, m4b_stretches
from pipeline.audio.tags import TrackTags, cover_mime, track_tags
from pipeline.errors import AssemblyError
from pipeline.types import SAMPLE_RATE, BookMetadata

log = logging.getLogger(__name__)

_Chapter = TypeVar("_Chapter", MeasuredChapter, StitchedChapter)

LIMITER_MARGIN_DB = 1.0  # headroom under the true-peak ceiling for lossy codecs' overshoot
MAX_GAIN_DB = 30.0  # never amplify a near-silent book into a wall of noise


def assemble_audiobook(
    chapters: Sequence[ChapterAudio],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions = AssemblyOptions(),  # noqa: B008 (frozen: safe to share)
    on_step: OnStep | None = None,
) -> AssemblyReport:
    """Turn chapters of sentence WAVs into finished audiobook files.

    Args:
        chapters: the book's chapters in reading order, each with its sentence WAVs in order.
        metadata: what the files are tagged with (title, authors, cover, ...).
        out_dir: receives only finished files (created if needed).
        work_dir: scratch space for chapter WAVs and encoder inputs, about the size of the book as
            16-bit PCM (created if needed). The big intermediates are deleted once assembly succeeds.
        options: pauses, loudness, formats, bitrate, split, narrator.
        on_step: told how far assembly is, for a progress display (see ``OnStep``).

    Returns:
        The files written (in a stable order) and where every chapter starts.

    Raises:
        AssemblyError: a sentence WAV is missing or corrupt, ffmpeg failed, or a disk is full. No
            file with a final name is left incomplete.
    """
    if not chapters:
        raise AssemblyError(
            f"{metadata.title!r}: no chapters to assemble (the book produced no text to read)"
        )
    out_dir, work_dir = Path(out_dir), Path(work_dir)
    if out_dir.resolve() == work_dir.resolve():
        raise AssemblyError(
            f"{out_dir}: used as both output and work directory (give assembly a separate scratch "
            "directory, so the output only ever holds finished files)"
        )
    _make_dirs(out_dir, work_dir)
    began = time.monotonic()
    step = on_step or _no_step
    step("assembling", 0, len(chapters))
    measured_chapters = measure_book(chapters, options)
    loudness, measured = choose_loudness(measured_chapters, options)
    log.info(
        "%r: measured %d chapters (%.0f s of audio) in %.1f s; loudness %.1f LUFS, gain %+.2f dB%s",
        metadata.title,
        len(measured_chapters),
        sum(c.seconds for c in measured_chapters),
        time.monotonic() - began,
        measured,
        loudness.gain_db,
        ", limiter on" if loudness.limit_dbfs is not None else "",
    )
    stretches: list[M4bStretch] = []  # where the chapters play in the M4B(s), when one is written
    readalong_audio: list[Path] = []  # the chapters' audio for a read-along EPUB, when one is asked for
    if writes_from_sentences(options, loudness):
        step("encoding", 0, len(chapters))
        outputs = write_wav_chapters(measured_chapters, metadata, out_dir, options, loudness)
        step("encoding", len(chapters), len(chapters))
    else:
        stitched = stitch_book(measured_chapters, work_dir, options)
        log.info("%r: stitched in %.1f s", metadata.title, time.monotonic() - began)
        step("assembling", len(chapters), len(chapters))
        outputs, stretches, readalong_audio = encode_outputs(stitched, metadata, out_dir, work_dir, options,
                                                             loudness, on_step)
        for chapter in stitched:  # on failure they stay, for a look; the next run overwrites them
            remove_quietly(chapter.wav_path)
    log.info("%r: wrote %d file(s) in %.1f s", metadata.title, len(outputs), time.monotonic() - began)
    return replace(_report(measured_chapters, outputs, loudness, measured),
                   timeline=chapter_timelines(measured_chapters), m4b_stretches=tuple(stretches),
                   readalong_audio=tuple(readalong_audio))


def measure_book(chapters: Sequence[ChapterAudio], options: AssemblyOptions) -> list[MeasuredChapter]:
    """Lay out and measure every chapter (chapter pause after all but the last), in helper
    processes, one per core (:mod:`pipeline.audio.stitch_helpers`), unless
    ``options.stitch_in_processes`` is off or there is one chapter or core: then in threads."""
    last = len(chapters) - 1
    calls = [
        (len(chapter.sentences), f"measuring chapter {chapter.index + 1} ({chapter.title!r})", measure_chapter,
         (chapter, options, options.chapter_pause_ms if position < last else 0))
        for position, chapter in enumerate(chapters)
    ]
    return run_per_chapter(calls, options)


def stitch_book(
    chapters: Sequence[MeasuredChapter], work_dir: Path, options: AssemblyOptions
) -> list[StitchedChapter]:
    """Write every chapter's WAV into ``work_dir`` for the encoders (as :func:`measure_book`)."""
    calls = [
        (len(chapter.sentences), f"stitching chapter {chapter.index + 1} into {path}", stitch_chapter,
         (chapter, path))
        for position, chapter in enumerate(chapters)
        for path in [work_dir / f"chapter_{position + 1:04d}.wav"]
    ]
    return run_per_chapter(calls, options)


def writes_from_sentences(options: AssemblyOptions, loudness: Loudness) -> bool:
    """Whether every output is a WAV chapter without a limiter, written straight from the
    sentences (``export.write_chapter_wav``): then no chapter is stitched to the work directory."""
    return (set(options.formats) - {"srt", "vtt"} == {"wav"}) and loudness.limit_dbfs is None


def write_wav_chapters(
    chapters: Sequence[MeasuredChapter],
    metadata: BookMetadata,
    out_dir: Path,
    options: AssemblyOptions,
    loudness: Loudness,
) -> list[Path]:
    """Every chapter's final WAV with the book's gain, from its sentences (as :func:`measure_book`)."""
    calls = [
        (len(chapter.sentences), f"writing {final_path}", write_chapter_wav, (chapter, tags, final_path, loudness))
        for chapter, _, tags, final_path in plan_chapter_files(chapters, metadata, out_dir, options)
    ]
    return run_per_chapter(calls, options)


def choose_loudness(chapters: Sequence[MeasuredChapter], options: AssemblyOptions) -> tuple[Loudness, float]:
    """One gain for the whole book to reach the target, and a limiter only if peaks need one.

    Returns:
        The loudness treatment and the book's measured integrated loudness (LUFS) before it.
    """
    measured = integrated_lufs([chapter.step_energies for chapter in chapters])
    if not options.normalize_loudness or math.isinf(measured):
        return Loudness(), measured
    gain = min(options.target_lufs - measured, MAX_GAIN_DB)
    true_peak = max(chapter.true_peak for chapter in chapters)
    peak_after_gain = 20.0 * math.log10(max(true_peak, 1.0) / 32768.0) + gain
    ceiling = options.true_peak_db - LIMITER_MARGIN_DB
    return Loudness(gain_db=gain, limit_dbfs=ceiling if peak_after_gain > ceiling else None), measured


def encode_outputs(
    stitched: Sequence[StitchedChapter],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions,
    loudness: Loudness,
    on_step: OnStep | None = None,
) -> tuple[list[Path], list[M4bStretch], list[Path]]:
    """Write every requested format; returns the final paths (M4B parts first, then per format),
    where the chapters play in the M4B(s), and the chapters' audio for a read-along EPUB (in
    ``work_dir``). ``on_step`` hears ``encoding`` k/n as each encode ends."""
    m4b_parts = (
        plan_m4b_parts(stitched, metadata, out_dir, work_dir, options) if "m4b" in options.formats else []
    )
    chapter_files = plan_chapter_files(stitched, metadata, out_dir, options)
    aac_encodes = [
        (piece.samples, bind(encode_m4b_piece, part.chapters[piece.chapter], piece, plan, aac_path, loudness,
                             options.bitrate))
        for part in m4b_parts
        for piece, plan, aac_path in zip(part.pieces, part.plans, part.aac_paths, strict=True)
    ]
    file_encodes = [
        (
            chapter.samples,
            bind(encode_chapter_file, chapter, audio_format, tags, final_path, loudness, options.bitrate),
        )
        for chapter, audio_format, tags, final_path in chapter_files
    ]
    readalong_audio = readalong_audio_paths(stitched, work_dir) if options.readalong_audio else []
    file_encodes += [
        (chapter.samples, bind(encode_readalong_audio, chapter, path, loudness, options.bitrate))
        for chapter, path in zip(stitched, readalong_audio)
    ]
    # Every encode is independent of the others: one pool for all of them.
    results = run_longest_first(counted([*aac_encodes, *file_encodes], "encoding", on_step or _no_step),
                                options.threads)
    frame_counts = iter(results[: len(aac_encodes)])
    outputs, stretches = [], []
    for part in m4b_parts:
        frames = [next(frame_counts) for _ in part.pieces]
        outputs.append(mux_m4b(part.chapters, part.pieces, part.aac_paths, frames, part.tags, part.final_path,
                               part.cover_path))
        stretches += m4b_stretches(part.chapters, part.pieces, frames, part.final_path)
        for aac_path in part.aac_paths:
            remove_quietly(aac_path)
    return outputs + [final_path for _, _, _, final_path in chapter_files], stretches, readalong_audio


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


def plan_m4b_parts(
    stitched: Sequence[StitchedChapter],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions,
) -> list[M4bPart]:
    """One M4B part unless ``split_hours`` asks for more; each with its own chapter marks."""
    groups = split_into_parts(stitched, options.split_hours)
    stem = safe_stem(metadata.title, fallback="Audiobook")
    cover_path = write_cover(metadata, work_dir)
    parts = []
    for number, chapters in enumerate(groups, start=1):
        if len(groups) == 1:
            name, title = f"{stem}.m4b", metadata.title
        else:
            name, title = f"{stem} - Part {number}.m4b", f"{metadata.title} (Part {number} of {len(groups)})"
        pieces = cut_into_pieces([c.samples for c in chapters], [c.trailing_silence for c in chapters],
                                 [c.cut_points for c in chapters], piece_samples(chapters, options))
        plans = plan_chapters([p.samples for p in pieces], [p.trailing_silence for p in pieces])
        parts.append(
            M4bPart(
                chapters=tuple(chapters),
                pieces=tuple(pieces),
                plans=tuple(plans),
                aac_paths=tuple(
                    work_dir / f"part{number:02d}_{chapters[piece.chapter].wav_path.stem}_{piece.start}.aac"
                    for piece in pieces
                ),
                tags=track_tags(metadata, options.narrator, title, number, len(groups)),
                final_path=out_dir / name,
                cover_path=cover_path,
            )
        )
    return parts


MIN_PIECE_SECONDS = 120.0  # an encode shorter than this pays more for its ffmpeg start than it gains


def piece_samples(chapters: Sequence[StitchedChapter], options: AssemblyOptions) -> int:
    """How long an M4B encode piece should be: four per encoding thread, so that the longest-first
    pool ends evenly (one AAC encode runs on one core at ~150x real time), and never very short."""
    total = sum(chapter.samples for chapter in chapters)
    return max(round(MIN_PIECE_SECONDS * SAMPLE_RATE), math.ceil(total / (4 * worker_count(options.threads))))


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
            files.append((chapter, audio_format, tags, out_dir / name))
    return files


def readalong_audio_paths(stitched: Sequence[StitchedChapter], work_dir: Path) -> list[Path]:
    """Where each chapter's audio for a read-along EPUB is encoded (in ``work_dir``)."""
    (work_dir / "readalong").mkdir(parents=True, exist_ok=True)
    return [work_dir / "readalong" / f"chapter_{number:04d}.m4a" for number in range(1, len(stitched) + 1)]


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


def _report(
    stitched: Sequence[MeasuredChapter], outputs: Sequence[Path], loudness: Loudness, measured: float
) -> AssemblyReport:
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
        gain_db=loudness.gain_db,
        measured_lufs=measured,
        limiter=loudness.limit_dbfs is not None,
    )


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


def _no_step(stage: str, done: int, total: int) -> None:
    return None


def _make_dirs(*directories: Path) -> None:
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AssemblyError(
                f"{directory}: cannot create the directory: {exc.strerror} "
                "(check the path and its permissions)"
            ) from exc

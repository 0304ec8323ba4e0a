"""The assembly stage: sentence WAVs in, finished audiobook files out.

1. Measure: each chapter is laid out from its sentences' measures (speech bounds, loudness,
   peaks; kept beside the sentence WAVs by the GPU worker, or taken now), in helper processes.
2. Decide loudness, chapter by chapter: each chapter's integrated loudness gives its gain to the
   target (every chapter plays equally loud, as audiobook platforms check per file); a limiter
   is added only where that gain would push peaks past the true-peak ceiling. Each chapter's
   treatment depends on that chapter alone, so a chapter finished early can be encoded early.
3. Write: WAV chapters that need no limiter straight from the sentences with the gain; for
   anything else each chapter is stitched into a WAV in the work directory first, then encoded:
   the M4B (one file, or one per part with ``split_hours``) and/or one file per chapter for each
   other format, each under a temporary name until complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pipeline.audio.aac import plan_chapters
from pipeline.audio.assembly_types import (
    AssemblyOptions,
    AssemblyReport,
    ChapterAudio,
    M4bStretch,
    OnStep,
)
from pipeline.audio.early_m4b import EarlyM4b, m4b_piece_path, rest_pieces
from pipeline.audio.export import (
    chapter_loudness,
    encode_chapter_file,
    encode_m4b_piece,
    encode_readalong_audio,
)
from pipeline.audio.failures import make_dirs, remove_quietly
from pipeline.audio.layout import TakePrepared, lay_out_book, stitch_book
from pipeline.audio.loudness import integrated_lufs
from pipeline.audio.m4b import mux_m4b
from pipeline.audio.names import safe_stem
from pipeline.audio.outputs import (
    M4bPart,
    Treatments,
    assembly_report,
    counted,
    made_ahead,
    move_into_place,
    no_step,
    plan_chapter_files,
    readalong_audio_paths,
    split_into_parts,
    write_cover,
    write_wav_chapters,
    writes_from_sentences,
)
from pipeline.audio.parallel import bind, run_longest_first
from pipeline.audio.prepared import PreparedChapter
from pipeline.audio.stitch import StitchedChapter
from pipeline.audio.tags import track_tags
from pipeline.audio.timeline import chapter_timelines, m4b_stretches
from pipeline.errors import AssemblyError
from pipeline.types import BookMetadata

log = logging.getLogger(__name__)


def assemble_audiobook(
    chapters: Sequence[ChapterAudio],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions = AssemblyOptions(),  # noqa: B008 (frozen: safe to share)
    on_step: OnStep | None = None,
    prepared: Sequence[PreparedChapter] | TakePrepared = (),
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
        prepared: the book's first chapters assembled ahead in ``work_dir`` (:mod:`.ahead`) while
            the rest was spoken: taken as they are where they are still made of the same sentences;
            a callable that returns them once their preparation ends: the chapters after a stretch
            still being encoded are laid out and encoded meanwhile (:mod:`.layout`).

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
    make_dirs(out_dir, work_dir, *(folder for _, folder in options.format_folders))
    began = time.monotonic()
    step = on_step or no_step
    step("assembling", 0, len(chapters))
    laid_out = lay_out_book(chapters, options, work_dir, prepared)
    ahead, measured_chapters = laid_out.ahead, laid_out.measured
    loudness = [chapter_loudness(chapter, options) for chapter in measured_chapters]
    measured = integrated_lufs([chapter.step_energies for chapter in measured_chapters])
    gains = [treatment.gain_db for treatment in loudness]
    log.info(
        "%r: measured %d chapters (%.0f s of audio) in %.1f s%s; loudness %.1f LUFS, chapter gains "
        "%+.2f to %+.2f dB%s",
        metadata.title,
        len(measured_chapters),
        sum(c.seconds for c in measured_chapters),
        time.monotonic() - began,
        f" ({len(ahead)} ahead; {laid_out.early} laid out, then {laid_out.waited:.1f} s waiting for the "
        "preparation ahead)" if ahead or laid_out.early else "",
        measured,
        min(gains),
        max(gains),
        f", limiter on {sum(t.limit_dbfs is not None for t in loudness)} chapter(s)"
        if any(t.limit_dbfs is not None for t in loudness) else "",
    )
    stretches: list[M4bStretch] = []  # where the chapters play in the M4B(s), when one is written
    readalong_audio: list[Path] = []  # the chapters' audio for a read-along EPUB, when one is asked for
    if writes_from_sentences(options, loudness):
        step("encoding", 0, len(chapters))
        outputs = write_wav_chapters(measured_chapters, metadata, out_dir, options, loudness, ahead)
        step("encoding", len(chapters), len(chapters))
    else:
        stitched = laid_out.stitched if laid_out.stitched is not None else [p.stitched for p in ahead] + \
            stitch_book(measured_chapters[len(ahead):], work_dir, options, first=len(ahead))
        log.info("%r: stitched in %.1f s%s", metadata.title, time.monotonic() - began,
                 f" ({len(ahead)} chapter(s) ahead)" if ahead else "")
        step("assembling", len(chapters), len(chapters))
        outputs, stretches, readalong_audio = encode_outputs(stitched, metadata, out_dir, work_dir, options,
                                                             loudness, on_step, ahead, laid_out.early_m4b)
        for chapter in stitched:  # on failure they stay, for a look; the next run overwrites them
            remove_quietly(chapter.wav_path)
    log.info("%r: wrote %d file(s) in %.1f s", metadata.title, len(outputs), time.monotonic() - began)
    return replace(assembly_report(measured_chapters, outputs, loudness, measured),
                   timeline=chapter_timelines(measured_chapters), m4b_stretches=tuple(stretches),
                   readalong_audio=tuple(readalong_audio))


def encode_outputs(
    stitched: Sequence[StitchedChapter],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions,
    loudness: Treatments,
    on_step: OnStep | None = None,
    ahead: Sequence[PreparedChapter] = (),
    early: EarlyM4b | None = None,
) -> tuple[list[Path], list[M4bStretch], list[Path]]:
    """Write every requested format; returns the final paths (M4B parts first, then per format),
    where the chapters play in the M4B(s), and the chapters' audio for a read-along EPUB (in
    ``work_dir``). ``on_step`` hears ``encoding`` k/n as each encode ends. The M4B pieces of
    chapters encoded ``ahead`` are not encoded again, nor are their files made ahead (moved into
    place) or their read-along audio."""
    m4b_parts = (
        plan_m4b_parts(stitched, metadata, out_dir, work_dir, options, ahead) if "m4b" in options.formats else []
    )
    if early is not None:  # pieces encoded while a stretch ahead was still being prepared
        m4b_parts = early.fill(m4b_parts)
    chapter_files = plan_chapter_files(stitched, metadata, out_dir, options)
    treatment = {chapter.index: t for chapter, t in zip(stitched, loudness, strict=True)}
    aac_encodes = [
        (piece.samples, bind(encode_m4b_piece, part.chapters[piece.chapter], piece, plan, aac_path,
                             treatment[part.chapters[piece.chapter].index], options.bitrate))
        for part in m4b_parts
        for piece, plan, aac_path, done in zip(part.pieces, part.plans, part.aac_paths, part.frames_ahead,
                                               strict=True)
        if done is None
    ]
    made = made_ahead(chapter_files, ahead)  # per-chapter files made ahead: moved into place
    file_encodes = [
        (chapter.samples, bind(encode_chapter_file, chapter, audio_format, tags, final_path,
                               treatment[chapter.index], options.bitrate))
        if final_path not in made else (0, bind(move_into_place, made[final_path], final_path))
        for chapter, audio_format, tags, final_path in chapter_files
    ]
    readalong_audio = readalong_audio_paths(stitched, work_dir) if options.readalong_audio else []
    readalong_ahead = {a.readalong for a in ahead if a.readalong is not None}
    file_encodes += [
        (chapter.samples, bind(encode_readalong_audio, chapter, path, treatment[chapter.index], options.bitrate))
        for chapter, path in zip(stitched, readalong_audio) if path not in readalong_ahead
    ]
    # Every encode is independent of the others: one pool for all of them.
    results = run_longest_first(counted([*aac_encodes, *file_encodes], "encoding", on_step or no_step),
                                options.threads)
    frame_counts = iter(results[: len(aac_encodes)])
    outputs, stretches = [], []
    for part in m4b_parts:
        frames = [next(frame_counts) if done is None else done for done in part.frames_ahead]
        outputs.append(mux_m4b(part.chapters, part.pieces, part.aac_paths, frames, part.tags, part.final_path,
                               part.cover_path))
        stretches += m4b_stretches(part.chapters, part.pieces, frames, part.final_path)
        for aac_path in part.aac_paths:
            remove_quietly(aac_path)
    return outputs + [final_path for _, _, _, final_path in chapter_files], stretches, readalong_audio


def plan_m4b_parts(
    stitched: Sequence[StitchedChapter],
    metadata: BookMetadata,
    out_dir: Path,
    work_dir: Path,
    options: AssemblyOptions,
    ahead: Sequence[PreparedChapter] = (),
) -> list[M4bPart]:
    """One M4B part unless ``split_hours`` asks for more; each with its own chapter marks. The
    pieces of chapters encoded ``ahead`` (one part only) are kept as they were encoded."""
    groups = split_into_parts(stitched, options.split_hours)
    stem = safe_stem(metadata.title, fallback="Audiobook")
    cover_path = write_cover(metadata, work_dir)
    parts = []
    for number, chapters in enumerate(groups, start=1):
        if len(groups) == 1:
            name, title = f"{stem}.m4b", metadata.title
        else:
            name, title = f"{stem} - Part {number}.m4b", f"{metadata.title} (Part {number} of {len(groups)})"
        encoded = [a for a in ahead if a.encoded] if len(groups) == 1 else []
        pieces = [p for a in encoded for p in a.pieces] + rest_pieces(chapters[len(encoded):], len(encoded), options)
        plans = plan_chapters([p.samples for p in pieces], [p.trailing_silence for p in pieces])
        ahead_plans = [plan for a in encoded for plan in a.plans]
        if plans[:len(ahead_plans)] != ahead_plans:  # cannot happen for a prefix; never trust it blindly
            log.warning("%r: chapters encoded ahead do not fit the M4B's plan; encoding them again", metadata.title)
            return plan_m4b_parts(stitched, metadata, out_dir, work_dir, options)
        done = [frames for a in encoded for frames in a.frames]
        parts.append(
            M4bPart(
                chapters=tuple(chapters),
                pieces=tuple(pieces),
                plans=tuple(plans),
                aac_paths=tuple(a for prepared in encoded for a in prepared.aac_paths) + tuple(
                    m4b_piece_path(work_dir, number, chapters[piece.chapter], piece) for piece in pieces[len(done):]
                ),
                tags=track_tags(metadata, options.narrator, title, number, len(groups)),
                final_path=out_dir / name,
                cover_path=cover_path,
                frames_ahead=tuple(done) + (None,) * (len(pieces) - len(done)),
            )
        )
    return parts

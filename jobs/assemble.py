"""Assemble: stitch a finished job's sentence audio into its audiobook files. Idempotent.

No database transaction stays open while the audio is stitched and encoded (seconds to minutes):
on SQLite every transaction holds the write lock (BEGIN IMMEDIATE), and GPU workers could not
record their batches meanwhile — on two H200s each stalled 12-14 s per assembled book. What
assembly needs is read first, the result is recorded after, and only if the job is still
assembling (a cancel may come in between).
"""

from __future__ import annotations

import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from jobs.batches import cleanup
from jobs.book_folders import claim_book_folder, default_out_root, disown_replaced, format_folders
from jobs.choices.options import recorded_options
from jobs.lifecycle import fail_job
from jobs.readalong import RecordedBook, read_book_again, recorded_book, write_readalong_outputs
from jobs.runtime import Runtime
from jobs.settings import process_environment
from jobs.status import OnStage, StageProgress
from pipeline.errors import AssemblyError
from pipeline.metadata_record import metadata_from_record
from pipeline.types import BookMetadata
from storage import repo
from storage.models import Job, JobState

if TYPE_CHECKING:
    from pipeline.audio import AssemblyOptions, AssemblyReport, ChapterAudio
    from pipeline.audio.assembly_types import OnStep
    from pipeline.audio.layout import TakePrepared
    from pipeline.readalong import ReadAlong

log = logging.getLogger(__name__)

def assemble_job(rt: Runtime, job_id: int, on_stage: OnStage | None = None,
                 prepared: TakePrepared = list) -> list[Path]:
    """Stitch job ``job_id``'s audio into its audiobook files; returns their paths. ``on_stage``
    hears how far assembly is (``assembling``, ``encoding`` k/n), for a progress display;
    ``prepared()``: its first chapters assembled ahead in its work directory
    (``assemble_ahead.py``), taken once the book is read and the chapters after a stretch still
    being prepared are laid out: a preparation under way ends meanwhile
    (``pipeline/audio/layout.py``)."""
    from pipeline.audio.stitch_helpers import set_helper_environment, start_helpers, stitch_helpers_wanted

    began = time.monotonic()
    with rt.read_session() as session:  # the other book's assembly reads beside it, not after
        job = repo.get_job(session, job_id)
        if job is None or job.job_state != JobState.ASSEMBLING:
            outputs = [Path(p) for p in job.outputs] if job is not None else []
            session.commit()
            return outputs
        options = assembly_options(job)
        # stitch helpers missing from this process start now (imports: ~1 s) while the sentences are read
        sentences = repo.job_progress(session, [job_id])[job_id].total
        set_helper_environment(process_environment())
        start_helpers(stitch_helpers_wanted(options, repo.chapter_count(session, job_id), sentences))
        chapters = chapters_to_assemble(rt, session, job_id)
        book = recorded_book(rt, session, job)
        metadata = book_metadata(rt, job)
        out_dir = _book_folder(rt, job)
        session.commit()
    cleanup.remove_dead_writers_of_jobs(rt, [job_id], out_dir)  # a killed assembly's half-written files
    log.info("job=%s: read %d sentences of %d chapters in %.2f s", job_id,
             sum(len(c.sentences) for c in chapters), len(chapters), time.monotonic() - began)
    report, read_along = _assemble_in_work_dir(rt, job_id, chapters, metadata, out_dir, options,
                                               _told(on_stage), book, prepared)
    if not _record_done(rt, job_id, report, read_along):
        log.warning("job=%s: no longer assembling (cancelled meanwhile?); its files stay in %s",
                    job_id, out_dir)
        return list(report.outputs)
    log.info("job=%s: done, %.1f s of audio in %s", job_id, report.total_seconds,
             ", ".join(str(p) for p in report.outputs))
    return list(report.outputs)


def _record_done(rt: Runtime, job_id: int, report: AssemblyReport, read_along: ReadAlong) -> bool:
    """The job done with its outputs and report; False when it is no longer assembling."""
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        if job is None or not repo.move_job(session, job_id, JobState.DONE, only_from=[JobState.ASSEMBLING]):
            session.commit()
            return False
        job.outputs = [str(p) for p in report.outputs]
        disown_replaced(session, job)
        job.report = {"total_seconds": round(report.total_seconds, 3),
                      "sentence_seconds": round(report.sentence_seconds, 3),
                      "pause_seconds": round(report.pause_seconds, 3),
                      "chapters": [{"title": c.title, "start_seconds": round(c.start_seconds, 3),
                                    "seconds": round(c.seconds, 3)} for c in report.chapters],
                      "timings": {"sentences": read_along.sentences, "path": str(read_along.timings)}}
        session.commit()
        return True


def assembly_options(job: Job) -> AssemblyOptions:
    """How the job's audiobook is put together: its formats and narrator tag."""
    from pipeline.audio import AssemblyOptions

    return AssemblyOptions(formats=tuple(job.options.get("formats", ["m4b"])),
                           narrator=recorded_options(job).narrator_tag())


def chapters_to_assemble(rt: Runtime, session: Session, job_id: int, first: int = 0,
                         end: int | None = None) -> list[ChapterAudio]:
    """The job's chapters (those at positions ``first`` to ``end``, exclusive) with their sentence
    WAVs in reading order (sentences without audio left out)."""
    from pipeline.audio import ChapterAudio, SentenceAudio

    wanted = repo.job_chapters(session, job_id)[first:end]
    whole = first == 0 and end is None
    audio = repo.job_sentence_audio(session, job_id, None if whole else [c.id for c in wanted])
    chapters = []
    for chapter in wanted:
        rows = audio.get(chapter.id, [])
        paths = rt.artifacts.resolve_many([path for path, _ in rows])
        sentences = tuple(SentenceAudio(path=path, paragraph_index=paragraph)
                          for path, (_, paragraph) in zip(paths, rows, strict=True))
        chapters.append(ChapterAudio(index=chapter.index, title=chapter.title, sentences=sentences))
    return chapters


def _told(on_stage: OnStage | None) -> OnStep | None:
    """Assembly's ``(stage, done, total)`` steps as the stage events of a run."""
    if on_stage is None:
        return None
    return lambda stage, done, total: on_stage(StageProgress(stage, done, total))


def _assemble_in_work_dir(rt: Runtime, job_id: int, chapters: list[ChapterAudio], metadata: BookMetadata,
                          out_dir: Path, options: AssemblyOptions, on_step: OnStep | None,
                          book: RecordedBook, prepared: TakePrepared = list
                          ) -> tuple[AssemblyReport, ReadAlong]:
    """assemble_audiobook, then the read-along outputs (which use its work files), in the job's
    work directory (removed after; what an earlier attempt left there is taken only where it is
    a chapter ``prepared`` ahead that still holds); fails the job with the assembly's message."""
    from pipeline.audio import assemble_audiobook
    from pipeline.audio.library_files import write_library_files

    work_dir = rt.artifacts.work_dir(job_id)
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        options = replace(options, format_folders=format_folders(out_dir, options.formats))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-again") as reader:
            again = reader.submit(read_book_again, book)  # beside the encoders, not after them
            report = assemble_audiobook(chapters, metadata, out_dir, work_dir, options, on_step, prepared)
            read_along = write_readalong_outputs(job_id, book, report, options, out_dir, again.result())
        for folder in (out_dir, *(folder for _, folder in options.format_folders)):  # each a library's book
            write_library_files(folder, metadata, options.narrator, options.formats)
        return replace(report, outputs=report.outputs + read_along.outputs), read_along
    except AssemblyError as exc:
        fail_job(rt, job_id, str(exc))
        raise
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _book_folder(rt: Runtime, job: Job) -> Path:
    """The folder claimed at submit; a job recorded before folders were claimed gets one now."""
    if (job.options or {}).get("out_dir"):
        return Path(job.options["out_dir"])
    return claim_book_folder(default_out_root(rt.settings.data_dir), job.title, job.authors, job.source_sha256)[0]


def book_metadata(rt: Runtime, job: Job) -> BookMetadata:
    meta = job.book_metadata or {}
    cover = None
    if meta.get("cover_path"):
        cover = rt.artifacts.resolve(meta["cover_path"]).read_bytes()
    return metadata_from_record(meta, job.title, tuple(job.authors), job.language, cover)

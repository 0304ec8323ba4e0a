"""Files nothing records: a dead writer's temporary files, and sentence audio no sentence row
points at (a batch that failed on a full disk, a worker killed between writing and recording).
They are removed, never mistaken for results: assembly reads only the paths sentences record.

When: a worker's start (every job's folder, the unrecorded audio too); the cluster's periodic sweep
(the temporary files of the jobs in flight); an assembly's start (its job's and book's folders);
and a `run`, resumed or new (its own job's folder).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from jobs.runtime import Runtime
from pipeline.temp_files import SETTLED_SECONDS, remove_dead_writers_files
from storage import repo
from storage.models import BatchState, JobState

log = logging.getLogger(__name__)



def remove_orphan_files(rt: Runtime, settled_seconds: float = SETTLED_SECONDS) -> int:
    """Remove the orphans of every job's audio folder; returns how many files went. Run at a
    worker's start: a process killed mid-write leaves its temporary file behind."""
    jobs_dir = rt.artifacts.root / "jobs"
    removed = 0
    for folder in sorted(jobs_dir.glob("*/audio")) if jobs_dir.is_dir() else []:
        job_id = folder.parent.name
        if job_id.isdigit():
            removed += _remove_job_orphans(rt, int(job_id), folder, time.time() - settled_seconds)
    if removed:
        log.warning("removed %d orphan files (temporary or unrecorded audio) under %s", removed, jobs_dir)
    return removed


def remove_dead_writers_of_jobs(rt: Runtime, job_ids: list[int] | None = None,
                                book_folder: Path | None = None) -> int:
    """Remove the temporary files whose writer is gone from the folders of ``job_ids`` (default:
    every job in flight) and from ``book_folder``; returns how many went. Cheap: temporary names
    only, no database beyond the list of jobs."""
    if job_ids is None:
        with rt.read_session() as session:
            job_ids = repo.job_ids_in(session, [*JobState.active(), JobState.INTERRUPTED])
    folders = [rt.artifacts.job_dir(job_id) for job_id in job_ids] + ([book_folder] if book_folder else [])
    removed = [temp for folder in folders for temp in remove_dead_writers_files(folder)]
    if removed:
        log.warning("removed %d temporary files their writers left (killed mid-write): %s", len(removed),
                    ", ".join(str(p) for p in removed[:5]) + (" ..." if len(removed) > 5 else ""))
    return len(removed)


def unrecorded_audio(rt: Runtime, batch_id: int) -> list[Path]:
    """Where a batch's pending sentences' WAVs are written (before they are recorded)."""
    with rt.read_session() as session:
        pending = repo.batch_pending_sentences(session, batch_id)
        return [rt.artifacts.root / rt.artifacts.sentence_audio(s.job_id, s.chapter.index, s.index)
                for s in pending]


def remove_audio(paths: list[Path]) -> int:
    """The WAVs (and their measures) at ``paths``, where they exist; returns how many files went."""
    return sum(_unlink(path) + _unlink(path.with_name(path.name + ".measure")) for path in paths)


def _remove_job_orphans(rt: Runtime, job_id: int, folder: Path, before: float) -> int:
    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        busy = job is not None and bool(repo.job_batches(session, job_id, [BatchState.RUNNING]))
        recorded = {str(p) for p in repo.job_sentence_audio_paths(session, job_id)} if job else set()
    removed = len(remove_dead_writers_files(folder, before))
    if not busy:
        for wav in folder.rglob("*.wav"):
            if str(wav.relative_to(rt.artifacts.root)) not in recorded and _settled(wav, before):
                removed += _unlink(wav) + _unlink(wav.with_name(wav.name + ".measure"))
    return removed


def _settled(path: Path, before: float) -> bool:
    try:
        return path.stat().st_mtime < before
    except OSError:
        return False


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0

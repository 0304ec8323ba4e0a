"""How far jobs and chapters are, and how fast audio was made recently."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from storage.models import Batch, Chapter, Sentence, SentenceState


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    failed: int
    audio_seconds: float
    hit_limit: int


def job_progress(session: Session, job_ids: Sequence[int]) -> dict[int, Progress]:
    """Sentence counts and produced audio per job, in one query."""
    if not job_ids:
        return {}
    done = Sentence.state == SentenceState.DONE.value
    rows = session.execute(
        select(
            Sentence.job_id,
            func.count(),
            func.sum(case((done, 1), else_=0)),
            func.sum(case((Sentence.state == SentenceState.FAILED.value, 1), else_=0)),
            func.coalesce(func.sum(case((done, Sentence.audio_seconds), else_=0.0)), 0.0),
            func.sum(case((Sentence.hit_limit.is_(True), 1), else_=0)),
        )
        .where(Sentence.job_id.in_(list(job_ids)))
        .group_by(Sentence.job_id)
    )
    progress = {job_id: Progress(0, 0, 0, 0.0, 0) for job_id in job_ids}
    for job_id, total, n_done, n_failed, seconds, n_limit in rows:
        progress[job_id] = Progress(int(total), int(n_done or 0), int(n_failed or 0), float(seconds or 0.0),
                                    int(n_limit or 0))
    return progress


def chapter_progress(session: Session, job_id: int) -> list[tuple[Chapter, int, int, float]]:
    """(chapter, sentences, done, audio seconds) for each chapter of a job."""
    done = Sentence.state == SentenceState.DONE.value
    rows = session.execute(
        select(Chapter, func.count(Sentence.id), func.sum(case((done, 1), else_=0)),
               func.coalesce(func.sum(case((done, Sentence.audio_seconds), else_=0.0)), 0.0))
        .join(Sentence, Sentence.chapter_id == Chapter.id, isouter=True)
        .where(Chapter.job_id == job_id)
        .group_by(Chapter.id)
        .order_by(Chapter.index)
    )
    return [(c, int(n), int(d or 0), float(s or 0.0)) for c, n, d, s in rows]

def recent_audio(session: Session, job_ids: Sequence[int], since: datetime) -> dict[int, tuple[float, datetime]]:
    """Audio seconds each job produced in batches finished after ``since``, and when that work began."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(Sentence.job_id, func.sum(Sentence.audio_seconds), func.min(Batch.leased_at))
        .join(Batch, Batch.id == Sentence.batch_id)
        .where(Sentence.job_id.in_(list(job_ids)), Sentence.state == SentenceState.DONE.value,
               Batch.finished_at >= since)
        .group_by(Sentence.job_id)
    )
    return {job_id: (float(seconds or 0.0), started) for job_id, seconds, started in rows if started}


def spoken_since(session: Session, job_ids: Sequence[int], since: datetime) -> tuple[float | None, int | None, datetime | None]:
    """What the jobs' batches finished since ``since`` made: audio seconds, characters of text,
    and when the earliest of those batches began."""
    audio, characters, began = session.execute(
        select(func.sum(Sentence.audio_seconds), func.sum(func.length(Sentence.text)), func.min(Batch.leased_at))
        .join(Batch, Batch.id == Sentence.batch_id)
        .where(Sentence.job_id.in_(job_ids), Sentence.state == SentenceState.DONE.value,
               Batch.finished_at >= since)).one()
    return audio, characters, began


def pending_characters(session: Session, job_ids: Sequence[int]) -> dict[int, int]:
    """The text each job still has to speak, in characters."""
    pending = Sentence.state == SentenceState.PENDING.value
    rows = session.execute(
        select(Sentence.job_id, func.sum(case((pending, func.length(Sentence.text)), else_=0)))
        .where(Sentence.job_id.in_(job_ids)).group_by(Sentence.job_id))
    return {job_id: int(characters or 0) for job_id, characters in rows}


def spoken_batch_spans(session: Session, job_ids: Sequence[int]) -> list[tuple[int, datetime, datetime]]:
    """(job, began, finished) of every batch that spoke sentences of the jobs."""
    rows = session.execute(
        select(Sentence.job_id, Batch.leased_at, Batch.finished_at).distinct()
        .join(Batch, Batch.id == Sentence.batch_id)
        .where(Sentence.job_id.in_(job_ids), Sentence.state == SentenceState.DONE.value,
               Batch.leased_at.is_not(None), Batch.finished_at.is_not(None)))
    return [(job_id, began, finished) for job_id, began, finished in rows]

"""The queue: the order queued batches are handed out in (the scheduling policy's ``queue_order``,
pipeline/scheduling.py says why), and what it holds. Each function takes the caller's Session and
never commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from pipeline.scheduling import QueueKey, SchedulingPolicy
from storage.models import Batch, BatchState, Job, Sentence


class BookPlace(NamedTuple):
    """Where a book's batches stand in the queue beside other books' (``next_queued_batch``)."""

    submitted_at: datetime  # the job's created_at: the books of one submit share it
    steps: int  # the GPT steps the whole book may take (its sentences' max_new_tokens)


def book_places(session: Session, job_ids: Iterable[int], planned_at: datetime) -> dict[int, BookPlace]:
    """Each job's ``BookPlace`` for a plan made at ``planned_at``: its submission, or, for a book
    planned before (a retry's rest), the new plan's time: a retry cannot jump ahead of the books
    submitted before it."""
    rows = session.execute(
        select(Job.id, Job.created_at, func.coalesce(func.sum(Sentence.max_new_tokens), 0),
               func.count(Sentence.batch_id))
        .join(Sentence, Sentence.job_id == Job.id, isouter=True)
        .where(Job.id.in_(list(job_ids))).group_by(Job.id, Job.created_at))
    return {job_id: BookPlace(planned_at if planned else created_at, int(steps))
            for job_id, created_at, steps, planned in rows}


def next_queued_batch(session: Session, suspects: bool = False, job_id: int | None = None,
                      policy: SchedulingPolicy | None = None) -> int | None:
    """The queued batch a streaming worker takes next, in the scheduling ``policy``'s queue order
    (pipeline/scheduling.py says why: priority, submission after submission, the larger book of
    one first, then plan after plan, then longest first).

    A suspect batch (``policy.is_suspect``: a holder's death was its doing) runs alone, never joins
    a running stream; ``suspects`` includes it (a new task's first batch). ``job_id``: only batches
    holding that job's sentences (an embedded run speaks its own book, whatever else the database
    holds)."""
    policy = policy or SchedulingPolicy()
    query = _of_job(select(Batch.id).where(Batch.state == BatchState.QUEUED.value), job_id)
    if not suspects:
        query = query.where(Batch.solo_deaths == 0, Batch.holder_deaths < policy.suspect_after_deaths)
    order = policy.queue_order
    return session.scalar(query.order_by(*(_QUEUE_COLUMNS[key] for key in order)).limit(1))


# How each of the policy's queue keys sorts (a plan's batches share their ``created_at``). A batch
# planned without its book's place (before it was kept) stands where its plan's time puts it.
_QUEUE_COLUMNS = {
    QueueKey.PRIORITY: Batch.priority.desc(),
    QueueKey.SUBMISSION: func.coalesce(Batch.submitted_at, Batch.created_at),
    QueueKey.LARGER_BOOK: func.coalesce(Batch.book_steps, 0).desc(),
    QueueKey.PLAN: Batch.created_at,
    QueueKey.LONGEST: Batch.longest_positions.desc(),
    QueueKey.OLDEST: Batch.id,
}


def queued_batch_count(session: Session, job_id: int | None = None) -> int:
    """How many batches wait in the queue (holding sentences of ``job_id``, when given)."""
    query = select(func.count(Batch.id)).where(Batch.state == BatchState.QUEUED.value)
    return session.scalar(_of_job(query, job_id)) or 0


def _of_job(query: Select, job_id: int | None) -> Select:
    if job_id is None:
        return query
    return query.where(Batch.id.in_(select(Sentence.batch_id).where(Sentence.job_id == job_id)))


def queued_batch_shape(session: Session, job_id: int) -> tuple[int, int]:
    """(most sentences in one, most cache positions of one) over the job's queued batches."""
    query = _of_job(select(func.max(Batch.size), func.max(Batch.longest_positions))
                    .where(Batch.state == BatchState.QUEUED.value), job_id)
    rows, positions = session.execute(query).one()
    return rows or 0, positions or 0

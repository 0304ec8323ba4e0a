"""Batches: planned, claimed (leased), given back, finished. Each function takes the caller's Session and never commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, bindparam, case, func, or_, select, update
from sqlalchemy.orm import Session

from pipeline.types import Batch as PlannedBatch
from storage.models import Batch, BatchState, Job, JobState, Sentence, SentenceState, utcnow
from storage.repo.queue import BookPlace
from storage.repo.statements import execute_many

_SENTENCE_TABLE = Sentence.__table__
# "batch_id IS NULL": a sentence is never moved from one batch to another, whatever two planners do
_ATTACH_SENTENCE = (update(_SENTENCE_TABLE)
                    .where(_SENTENCE_TABLE.c.id == bindparam("sentence_id"), _SENTENCE_TABLE.c.batch_id.is_(None))
                    .values(batch_id=bindparam("new_batch_id")))


def create_batches(session: Session, plan: Sequence[PlannedBatch],
                   planned_at: datetime | None = None, place: BookPlace | None = None) -> list[Batch]:
    """Persist planned batches, their ids in plan order, and attach their sentences (which the
    caller holds locked). Every batch of the plan gets the same ``created_at`` (``planned_at``,
    else now): streams take plans in the order they were made (``next_queued_batch``), after the
    book ``place`` (its submission, its size) says; without one, the plan's time is its submission.

    One INSERT of the batches, one executemany UPDATE by primary key (no ORM session sync: its
    default matched every loaded sentence against every batch's id list, quadratic in the book;
    and a batch at a time, a CPU plan of 16-sentence batches took 0.5 s)."""
    planned_at = planned_at or utcnow()
    rows = [Batch(size=len(planned.sentence_ids), estimated_bytes=planned.estimated_bytes,
                  priority=planned.priority, longest_positions=planned.longest_positions,
                  created_at=planned_at, submitted_at=place.submitted_at if place else None,
                  book_steps=place.steps if place else None)
            for planned in plan]
    session.add_all(rows)
    session.flush()
    batch_ids = [batch.id for batch in rows]  # read once: an ORM attribute per sentence cost 60 ms a book
    execute_many(session, _ATTACH_SENTENCE, ("new_batch_id", "sentence_id"),
                 [(batch_id, sentence_id) for batch_id, planned in zip(batch_ids, plan)
                  for sentence_id in planned.sentence_ids])
    return rows


def claim_batch(session: Session, batch_id: int, worker: str, lease_seconds: float,
                now: datetime | None = None, parent: str | None = None) -> Batch | None:
    """Lease a batch for ``worker``: queued ones, running ones whose lease expired, or its own
    (a retried task of the same process).

    Returns None when the batch is finished, unknown, or held by a live lease (a duplicate delivery).
    """
    now = now or utcnow()
    stale = now - timedelta(seconds=lease_seconds)
    result = session.execute(
        update(Batch)
        .where(Batch.id == batch_id,
               or_(Batch.state == BatchState.QUEUED.value,
                   and_(Batch.state == BatchState.RUNNING.value,
                        # a process runs one task at a time: its own earlier attempt has ended
                        or_(Batch.heartbeat_at.is_(None), Batch.heartbeat_at < stale,
                            Batch.leased_by == worker))))
        .values(state=BatchState.RUNNING.value, leased_by=worker, holder_parent=parent, leased_at=now,
                heartbeat_at=now, attempts=Batch.attempts + 1)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return None
    return session.get(Batch, batch_id, populate_existing=True)


def batch_needs_refine(session: Session, batch_id: int) -> bool:
    """Whether a job with sentences in the batch asked for upstream's refine pass."""
    options = session.scalars(select(Job.options).where(Job.id.in_(
        select(Sentence.job_id).where(Sentence.batch_id == batch_id).distinct())))
    return any(bool((o or {}).get("refine")) for o in options)


def take_over_batch(session: Session, batch_id: int, worker: str, dead_worker: str,
                    parent: str | None = None, its_doing: bool = True) -> Batch | None:
    """Take a running batch from a worker known to be dead (its process is gone from this host).
    The death counts against the batch when ``its_doing`` (only the holder died, not its whole
    worker) and the batch was the only one the dead process held."""
    now = utcnow()
    counted = its_doing and _held_by(session, dead_worker) == 1
    result = session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.state == BatchState.RUNNING.value, Batch.leased_by == dead_worker)
        .values(leased_by=worker, holder_parent=parent, leased_at=now, heartbeat_at=now,
                attempts=Batch.attempts + 1, holder_deaths=Batch.holder_deaths + 1,
                solo_deaths=Batch.solo_deaths + int(counted))
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return None
    return session.get(Batch, batch_id, populate_existing=True)


def renew_lease(session: Session, batch_id: int, worker: str, now: datetime | None = None) -> bool:
    result = session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.leased_by == worker, Batch.state == BatchState.RUNNING.value)
        .values(heartbeat_at=now or utcnow())
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def holds_lease(session: Session, batch_id: int, worker: str) -> bool:
    """True while ``worker`` still owns the running batch (checked again before results are kept)."""
    return session.scalar(
        select(func.count()).select_from(Batch).where(
            Batch.id == batch_id, Batch.leased_by == worker, Batch.state == BatchState.RUNNING.value)
    ) == 1


def batch_pending_sentences(session: Session, batch_id: int) -> list[Sentence]:
    """The sentences of a batch still to be spoken, skipping finished or cancelled jobs."""
    return list(session.scalars(
        select(Sentence)
        .join(Job, Job.id == Sentence.job_id)
        .where(Sentence.batch_id == batch_id, Sentence.state == SentenceState.PENDING.value,
               Job.state == JobState.SYNTHESIZING.value)
        .order_by(Sentence.id)
    ))


def batch_job_ids(session: Session, batch_id: int) -> list[int]:
    return list(session.scalars(select(Sentence.job_id).where(Sentence.batch_id == batch_id).distinct()))


def finish_batch(session: Session, batch_id: int, state: BatchState = BatchState.DONE,
                 error: str | None = None) -> None:
    session.execute(
        update(Batch).where(Batch.id == batch_id)
        .values(state=state.value, finished_at=utcnow(), error=error)
        .execution_options(synchronize_session=False)
    )


def release_batch(session: Session, batch_id: int, worker: str, error: str) -> bool:
    """Give a leased batch back to the queue after a transient failure (counted in ``failures``).
    False when ``worker`` no longer held it."""
    result = session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.leased_by == worker)
        .values(state=BatchState.QUEUED.value, leased_by=None, heartbeat_at=None, error=error,
                failures=Batch.failures + 1)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def running_holders(session: Session) -> dict[str, tuple[str | None, datetime | None]]:
    """Every process holding running batches: its parent (as recorded) and its latest heartbeat."""
    held: dict[str, tuple[str | None, datetime | None]] = {}
    rows = session.execute(select(Batch.leased_by, Batch.holder_parent, Batch.heartbeat_at)
                           .where(Batch.state == BatchState.RUNNING.value).order_by(Batch.id))
    for holder, parent, beat in rows:
        _, latest = held.get(holder or "", (None, None))
        held[holder or ""] = (parent, max((b for b in (latest, beat) if b is not None), default=None))
    return held


def return_dead_holders_batches(session: Session, holder: str, its_doing: bool = True) -> list[int]:
    """A dead process's running batches back to the queue, each a suspect from now on; the death
    counts against a batch when ``its_doing`` and it was the only one the dead process held.
    Returns the batches this call returned: one sweeper resends each, once."""
    counted = its_doing and _held_by(session, holder) == 1
    result = session.execute(
        update(Batch).where(Batch.leased_by == holder, Batch.state == BatchState.RUNNING.value)
        .values(state=BatchState.QUEUED.value, leased_by=None, holder_parent=None, heartbeat_at=None,
                sent_at=None, holder_deaths=Batch.holder_deaths + 1, solo_deaths=Batch.solo_deaths + int(counted))
        .returning(Batch.id)
        .execution_options(synchronize_session=False))
    return sorted(result.scalars())


def _held_by(session: Session, holder: str) -> int:
    return session.scalar(select(func.count(Batch.id)).where(
        Batch.leased_by == holder, Batch.state == BatchState.RUNNING.value)) or 0


def mark_batches_sent(session: Session, batch_ids: Sequence[int], now: datetime | None = None) -> None:
    if batch_ids:
        session.execute(update(Batch).where(Batch.id.in_(batch_ids)).values(sent_at=now or utcnow())
                        .execution_options(synchronize_session=False))


def claim_unsent_batches(session: Session, before: datetime) -> list[int]:
    """Queued batches whose message was never sent (a kill between their plan's commit and the
    send), planned before ``before``: marked sent now and returned, so one sweeper sends each."""
    result = session.execute(
        update(Batch).where(Batch.state == BatchState.QUEUED.value, Batch.sent_at.is_(None),
                            Batch.created_at < before)
        .values(sent_at=utcnow()).returning(Batch.id).execution_options(synchronize_session=False))
    return sorted(result.scalars())


def running_batch_count(session: Session) -> int:
    return session.scalar(select(func.count(Batch.id)).where(Batch.state == BatchState.RUNNING.value)) or 0


def last_batch_send(session: Session) -> datetime | None:
    """When a message for a queued batch was last sent (None: never)."""
    return session.scalar(select(func.max(Batch.sent_at)).where(Batch.state == BatchState.QUEUED.value))


def stale_batches(session: Session, lease_seconds: float, now: datetime | None = None) -> list[int]:
    """Running batches whose worker stopped heart-beating (crashed host, killed process)."""
    stale = (now or utcnow()) - timedelta(seconds=lease_seconds)
    return list(session.scalars(
        select(Batch.id).where(Batch.state == BatchState.RUNNING.value, Batch.heartbeat_at < stale)))


def job_batches(session: Session, job_id: int, states: Iterable[BatchState]) -> list[int]:
    """The batches holding sentences of job ``job_id`` in one of ``states``, in plan order."""
    return list(session.scalars(
        select(Batch.id).join(Sentence, Sentence.batch_id == Batch.id)
        .where(Sentence.job_id == job_id, Batch.state.in_([s.value for s in states]))
        .group_by(Batch.id).order_by(Batch.id)))


def give_back_batches(session: Session, batch_ids: Sequence[int]) -> None:
    """Running batches back to the queue without counting the attempt: their process was stopped
    on purpose (an interrupted `tts-jobs run`), the batch did nothing wrong."""
    if not batch_ids:
        return
    session.execute(
        update(Batch).where(Batch.id.in_(batch_ids), Batch.state == BatchState.RUNNING.value)
        .values(state=BatchState.QUEUED.value, leased_by=None, heartbeat_at=None,
                attempts=case((Batch.attempts > 0, Batch.attempts - 1), else_=0))
        .execution_options(synchronize_session=False))


def give_back_own_batches(session: Session, worker: str) -> list[int]:
    """Running batches leased by ``worker`` (host:pid), back to the queue in their place: at the
    start of a task they are an earlier attempt's of the same process (a process runs one task at
    a time), left running when the database failed under it and nothing could give them back."""
    own = list(session.scalars(select(Batch.id).where(Batch.state == BatchState.RUNNING.value,
                                                      Batch.leased_by == worker)))
    give_back_batches(session, own)
    return own


def queued_batches(session: Session) -> list[int]:
    return list(session.scalars(select(Batch.id).where(Batch.state == BatchState.QUEUED.value)))

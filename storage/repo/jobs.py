"""Jobs: their states, their stage holders and the messages sent for them. Each function takes the caller's Session and never commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from storage.models import Job, JobMode, JobState, Sentence, SentenceState, utcnow


def get_job(session: Session, job_id: int, *, for_update: bool = False) -> Job | None:
    """The job; ``for_update`` locks its row until the transaction ends (PostgreSQL; a SQLite
    transaction holds the whole database anyway)."""
    return session.get(Job, job_id, with_for_update=for_update or None)


def list_jobs(session: Session, limit: int = 200) -> list[Job]:
    return list(session.scalars(select(Job).order_by(Job.id.desc()).limit(limit)))


def move_job(session: Session, job_id: int, to: JobState, *, only_from: Iterable[JobState],
             error: str | None = None) -> bool:
    """Change a job's state if it is in one of ``only_from``; False when another actor got there first.
    The new stage's message is not sent yet (``sent_at`` cleared, its back-off restarted: the
    reconciler's marks)."""
    values: dict = {"state": to.value, "updated_at": utcnow(), "sent_at": None, "sends": 0}
    if to.is_final:
        values["finished_at"] = utcnow()
    if error is not None:
        values["error"] = error
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state.in_([s.value for s in only_from]))
        .values(**values)
        .execution_options(synchronize_session="fetch")
    )
    return result.rowcount == 1


def find_jobs_by_sha256(session: Session, sha256: str) -> list[Job]:
    return list(session.scalars(select(Job).where(Job.source_sha256 == sha256).order_by(Job.id)))


def mark_job_sent(session: Session, job_id: int, unless_since: datetime | None = None,
                  now: datetime | None = None) -> bool:
    """Record that a message for the job's current stage goes out now. With ``unless_since``, only
    if none went out since then (and none is recorded as never sent since the stage began before
    it): of several sweepers, one resends. True when recorded."""
    query = update(Job).where(Job.id == job_id)
    if unless_since is not None:
        query = query.where(or_(Job.sent_at < unless_since,
                                and_(Job.sent_at.is_(None), Job.updated_at < unless_since)))
    result = session.execute(query.values(sent_at=now or utcnow(), sends=Job.sends + 1, updated_at=Job.updated_at)
                             .execution_options(synchronize_session=False))
    return result.rowcount == 1


def cluster_jobs_in(session: Session, states: Iterable[JobState]) -> list[Job]:
    """Jobs that workers move, in one of ``states``."""
    return list(session.scalars(select(Job).where(
        Job.mode == JobMode.CLUSTER.value, Job.state.in_([s.value for s in states])).order_by(Job.id)))


def jobs_with_unplanned_sentences(session: Session) -> list[int]:
    """Cluster jobs being spoken that still have sentences no batch holds."""
    return list(session.scalars(
        select(Job.id).where(Job.mode == JobMode.CLUSTER.value, Job.state == JobState.SYNTHESIZING.value,
                             Job.id.in_(select(Sentence.job_id).where(
                                 Sentence.batch_id.is_(None), Sentence.state == SentenceState.PENDING.value)))
        .order_by(Job.id)))


def take_job_stage(session: Session, job_id: int, holder: str, previous: str | None) -> bool:
    """Record ``holder`` as the process working on the job's stage, if ``previous`` (None: nobody)
    still is: compare-and-set, so that of two deliveries only one takes it."""
    condition = Job.runner.is_(None) if previous is None else Job.runner == previous
    result = session.execute(update(Job).where(Job.id == job_id, condition)
                             .values(runner=holder, heartbeat_at=utcnow(), updated_at=Job.updated_at)
                             .execution_options(synchronize_session=False))
    return result.rowcount == 1


def release_job_stage(session: Session, job_id: int, holder: str) -> None:
    """``holder`` is done with the job's stage (if it still held it)."""
    session.execute(update(Job).where(Job.id == job_id, Job.runner == holder)
                    .values(runner=None, heartbeat_at=None, updated_at=Job.updated_at)
                    .execution_options(synchronize_session=False))


def delete_job(session: Session, job_id: int) -> None:
    """Remove a job and its rows (a submission withdrawn before anything ran)."""
    job = session.get(Job, job_id)
    if job is not None:
        session.delete(job)


def job_ids_in(session: Session, states: Iterable[JobState]) -> list[int]:
    """The ids of the jobs in one of ``states``, oldest first."""
    return list(session.scalars(select(Job.id).where(Job.state.in_([s.value for s in states])).order_by(Job.id)))


def embedded_jobs_in(session: Session, states: Iterable[JobState]) -> list[Job]:
    """Jobs of `tts-jobs run` processes in one of ``states``."""
    return list(session.scalars(select(Job).where(
        Job.mode == JobMode.EMBEDDED.value, Job.state.in_([s.value for s in states])).order_by(Job.id)))


def set_runner(session: Session, job_id: int, runner: str | None, now: datetime | None = None) -> None:
    """Record the process that moves an embedded job (None: no process), with a fresh heartbeat."""
    session.execute(update(Job).where(Job.id == job_id)
                    .values(runner=runner, heartbeat_at=(now or utcnow()) if runner else None,
                            updated_at=Job.updated_at)
                    .execution_options(synchronize_session="fetch"))


def beat(session: Session, job_id: int, runner: str, now: datetime | None = None) -> bool:
    """Renew an embedded job's heartbeat; False when ``runner`` no longer runs it."""
    result = session.execute(update(Job).where(Job.id == job_id, Job.runner == runner)
                             .values(heartbeat_at=now or utcnow(), updated_at=Job.updated_at)
                             .execution_options(synchronize_session=False))
    return result.rowcount == 1

"""Repository functions over the job table. Each takes the caller's Session and never commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from datetime import datetime, timedelta

from sqlalchemy import Select, and_, bindparam, case, func, insert, or_, select, update
from sqlalchemy.orm import Session

from pipeline.types import Batch as PlannedBatch
from storage.models import (
    Batch,
    BatchState,
    Chapter,
    Job,
    JobMode,
    JobState,
    Sentence,
    SentenceState,
    Voice,
    Worker,
    utcnow,
)

# ---------------------------------------------------------------- jobs


def get_job(session: Session, job_id: int, *, for_update: bool = False) -> Job | None:
    """The job; ``for_update`` locks its row until the transaction ends (PostgreSQL; a SQLite
    transaction holds the whole database anyway)."""
    return session.get(Job, job_id, with_for_update=for_update or None)


def list_jobs(session: Session, limit: int = 200) -> list[Job]:
    return list(session.scalars(select(Job).order_by(Job.id.desc()).limit(limit)))


def move_job(session: Session, job_id: int, to: JobState, *, only_from: Iterable[JobState],
             error: str | None = None) -> bool:
    """Change a job's state if it is in one of ``only_from``; False when another actor got there first."""
    values: dict = {"state": to.value, "updated_at": utcnow()}
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


def delete_job(session: Session, job_id: int) -> None:
    """Remove a job and its rows (a submission withdrawn before anything ran)."""
    job = session.get(Job, job_id)
    if job is not None:
        session.delete(job)


def embedded_jobs_in(session: Session, states: Iterable[JobState]) -> list[Job]:
    """Jobs of `tts-jobs run` processes in one of ``states``."""
    return list(session.scalars(select(Job).where(
        Job.mode == JobMode.EMBEDDED.value, Job.state.in_([s.value for s in states])).order_by(Job.id)))


def set_runner(session: Session, job_id: int, runner: str | None, now: datetime | None = None) -> None:
    """Record the process that moves an embedded job (None: no process), with a fresh heartbeat."""
    session.execute(update(Job).where(Job.id == job_id)
                    .values(runner=runner, heartbeat_at=(now or utcnow()) if runner else None)
                    .execution_options(synchronize_session="fetch"))


def beat(session: Session, job_id: int, runner: str, now: datetime | None = None) -> bool:
    """Renew an embedded job's heartbeat; False when ``runner`` no longer runs it."""
    result = session.execute(update(Job).where(Job.id == job_id, Job.runner == runner)
                             .values(heartbeat_at=now or utcnow())
                             .execution_options(synchronize_session=False))
    return result.rowcount == 1


# ---------------------------------------------------------------- chapters and sentences


@dataclass(frozen=True)
class NewSentence:
    index: int
    paragraph_index: int
    text: str
    seed: int
    min_new_tokens: int
    max_new_tokens: int


# what a new sentence row gets besides its NewSentence fields: the model's own defaults
_SENTENCE_DEFAULTS = {c.key: c.default.arg for c in Sentence.__table__.c
                      if c.default is not None and c.default.is_scalar}
_SENTENCE_KEYS = ("job_id", "chapter_id", "index", "paragraph_index", "text", "seed", "min_new_tokens",
                  "max_new_tokens", *_SENTENCE_DEFAULTS)


def add_chapters(session: Session, job_id: int,
                 chapters: Sequence[tuple[int, str, Sequence[NewSentence]]]) -> list[Chapter]:
    """Record a book's chapters (index, title, sentences): one INSERT of the chapters, then one
    executemany of every sentence, no ORM objects (a 5,000-sentence book took 0.8 s as objects)."""
    rows = [Chapter(job_id=job_id, index=index, title=title) for index, title, _ in chapters]
    session.add_all(rows)
    session.flush()
    defaults = tuple(_SENTENCE_DEFAULTS.values())
    _executemany(session, insert(Sentence.__table__), _SENTENCE_KEYS, [
        (job_id, chapter.id, s.index, s.paragraph_index, s.text, s.seed, s.min_new_tokens, s.max_new_tokens,
         *defaults)
        for chapter, (_, _, sentences) in zip(rows, chapters) for s in sentences])
    return rows


def _executemany(session: Session, statement: Any, keys: Sequence[str], rows: Sequence[tuple]) -> None:
    """Run ``statement`` once per row (values in ``keys`` order) as one driver executemany.

    SQLAlchemy compiles it once (quoting, the driver's parameter style) and the rows go to the
    driver as they are: its own executemany converts every row's parameters in Python, which was
    half the time of inserting a 10,000-sentence book on SQLite (100 ms of 160). Plain values only
    (ints, text, booleans): no type conversion is applied. A statement that needs a default
    computed per row (a callable column default) goes through SQLAlchemy instead."""
    if not rows:
        return
    connection = session.connection()
    compiled = statement.compile(dialect=connection.dialect, column_keys=list(keys))
    if compiled.insert_prefetch or compiled.update_prefetch or set(compiled.bind_names.values()) != set(keys):
        connection.execute(statement, [dict(zip(keys, row)) for row in rows])
        return
    if compiled.positional:
        order = [keys.index(name) for name in compiled.positiontup]
        params: Sequence[Any] = (rows if order == list(range(len(keys)))
                                 else [tuple(row[i] for i in order) for row in rows])
    else:
        params = [dict(zip(keys, row)) for row in rows]
    connection.exec_driver_sql(compiled.string, params)


def has_chapters(session: Session, job_id: int) -> bool:
    return chapter_count(session, job_id) > 0


def chapter_count(session: Session, job_id: int) -> int:
    return session.scalar(select(func.count()).select_from(Chapter).where(Chapter.job_id == job_id)) or 0


def job_chapters(session: Session, job_id: int) -> list[Chapter]:
    return list(session.scalars(select(Chapter).where(Chapter.job_id == job_id).order_by(Chapter.index)))


def chapter_sentences(session: Session, chapter_id: int) -> list[Sentence]:
    return list(session.scalars(
        select(Sentence).where(Sentence.chapter_id == chapter_id).order_by(Sentence.index)))


def job_sentence_audio(session: Session, job_id: int) -> dict[int, list[tuple[str, int]]]:
    """(audio path, paragraph index) of every sentence with audio, by chapter id, in reading
    order: one query of three columns (assembly reads a whole book's worth)."""
    rows = session.execute(
        select(Sentence.chapter_id, Sentence.audio_path, Sentence.paragraph_index)
        .where(Sentence.job_id == job_id, Sentence.audio_path.is_not(None))
        .order_by(Sentence.chapter_id, Sentence.index))
    by_chapter: dict[int, list[tuple[str, int]]] = {}
    for chapter_id, audio_path, paragraph_index in rows:
        by_chapter.setdefault(chapter_id, []).append((audio_path, paragraph_index))
    return by_chapter


def unplanned_sentences(session: Session, job_ids: Sequence[int] | None = None) -> list[Any]:
    """Pending sentences of active jobs that no live batch holds, locked against other planners:
    rows of what the planner reads (id, job_id, text, max_new_tokens), not whole ORM objects
    (building 10,000 of those was half of planning two books).

    On PostgreSQL the rows are locked FOR UPDATE SKIP LOCKED, so concurrent planners split the work
    instead of planning the same sentence twice. (SQLite ignores the clause; it has one writer.)
    """
    query = _unplanned(select(Sentence.id, Sentence.job_id, Sentence.text, Sentence.max_new_tokens), job_ids)
    return list(session.execute(query.order_by(Sentence.id).with_for_update(skip_locked=True, of=Sentence)))


def has_unplanned_sentences(session: Session, job_ids: Sequence[int] | None = None) -> bool:
    """Whether ``unplanned_sentences`` may find any (rows another planner holds count), locking nothing."""
    return session.scalar(_unplanned(select(Sentence.id), job_ids).limit(1)) is not None


def _unplanned(query: Select, job_ids: Sequence[int] | None) -> Select:
    query = (query.join(Job, Job.id == Sentence.job_id)
             .where(Sentence.state == SentenceState.PENDING.value, Sentence.batch_id.is_(None),
                    Job.state == JobState.SYNTHESIZING.value))
    return query if job_ids is None else query.where(Sentence.job_id.in_(job_ids))


def jobs_being_read(session: Session) -> int:
    """Jobs whose book is still to be read into sentences (queued or ingesting)."""
    return session.scalar(select(func.count()).select_from(Job).where(
        Job.state.in_([JobState.QUEUED.value, JobState.INGESTING.value]))) or 0


def job_priorities(session: Session, job_ids: Iterable[int]) -> dict[int, int]:
    rows = session.execute(select(Job.id, Job.priority).where(Job.id.in_(list(job_ids))))
    return {job_id: priority for job_id, priority in rows}


@dataclass(frozen=True)
class SpokenSentence:
    """What synthesis recorded for one sentence."""

    sentence_id: int
    audio_path: str
    audio_seconds: float
    gpt_steps: int
    hit_limit: bool


def sentence_states(session: Session, sentence_ids: Sequence[int]) -> dict[int, str]:
    """The state of each of these sentences that still exists, in one query."""
    rows = session.execute(select(Sentence.id, Sentence.state).where(Sentence.id.in_(sentence_ids)))
    return {sentence_id: state for sentence_id, state in rows}


def record_spoken_sentences(session: Session, spoken: Sequence[SpokenSentence]) -> None:
    """A batch's spoken sentences done, with their audio, as one executemany UPDATE by primary
    key (1,024 sentences one by one took ~0.3 s, the GPU idle meanwhile)."""
    if spoken:
        session.execute(update(Sentence), [
            {"id": s.sentence_id, "audio_path": s.audio_path, "audio_seconds": s.audio_seconds,
             "gpt_steps": s.gpt_steps, "hit_limit": s.hit_limit, "state": SentenceState.DONE.value,
             "error": None} for s in spoken])


def fail_sentence(session: Session, sentence: Sentence, error: str) -> None:
    sentence.state = SentenceState.FAILED.value
    sentence.error = error


def reset_failed_sentences(session: Session, job_id: int) -> int:
    """Make failed and orphaned sentences of a job pending again (for `retry`)."""
    result = session.execute(
        update(Sentence)
        .where(Sentence.job_id == job_id, Sentence.state != SentenceState.DONE.value)
        .values(state=SentenceState.PENDING.value, batch_id=None, error=None, attempts=0)
    )
    return result.rowcount


# ---------------------------------------------------------------- batches


_SENTENCE_TABLE = Sentence.__table__
# "batch_id IS NULL": a sentence is never moved from one batch to another, whatever two planners do
_ATTACH_SENTENCE = (update(_SENTENCE_TABLE)
                    .where(_SENTENCE_TABLE.c.id == bindparam("sentence_id"), _SENTENCE_TABLE.c.batch_id.is_(None))
                    .values(batch_id=bindparam("new_batch_id")))


def create_batches(session: Session, plan: Sequence[PlannedBatch],
                   planned_at: datetime | None = None) -> list[Batch]:
    """Persist planned batches, their ids in plan order, and attach their sentences (which the
    caller holds locked). Every batch of the plan gets the same ``created_at`` (``planned_at``,
    else now): streams take plans in the order they were made (``next_queued_batch``).

    One INSERT of the batches, one executemany UPDATE by primary key (no ORM session sync: its
    default matched every loaded sentence against every batch's id list, quadratic in the book;
    and a batch at a time, a CPU plan of 16-sentence batches took 0.5 s)."""
    planned_at = planned_at or utcnow()
    rows = [Batch(size=len(planned.sentence_ids), estimated_bytes=planned.estimated_bytes,
                  priority=planned.priority, longest_positions=planned.longest_positions,
                  created_at=planned_at)
            for planned in plan]
    session.add_all(rows)
    session.flush()
    batch_ids = [batch.id for batch in rows]  # read once: an ORM attribute per sentence cost 60 ms a book
    _executemany(session, _ATTACH_SENTENCE, ("new_batch_id", "sentence_id"),
                 [(batch_id, sentence_id) for batch_id, planned in zip(batch_ids, plan)
                  for sentence_id in planned.sentence_ids])
    return rows


def claim_batch(session: Session, batch_id: int, worker: str, lease_seconds: float,
                now: datetime | None = None) -> Batch | None:
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
        .values(state=BatchState.RUNNING.value, leased_by=worker, leased_at=now, heartbeat_at=now,
                attempts=Batch.attempts + 1)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return None
    return session.get(Batch, batch_id, populate_existing=True)


def next_queued_batch(session: Session) -> int | None:
    """The queued batch a streaming worker takes next: the highest priority, then the earliest plan
    (its batches share their ``created_at``), then the longest sentences, then the oldest batch.

    A plan sorts every sentence pending when it ran (pipeline/batching.py). Books read at different
    times — a shelf's, one plan per book as each is read — run plan after plan, so each finishes
    and is assembled while the next is spoken; taken longest first across plans, every book
    finished in the stream's last second and all of their encoding came after the GPUs were done.
    Plan order, not book order: a book being spoken is not held up by an older one read later or
    retried, and the last plan made — the one cut into end pieces — ends the queue. Within a plan
    the longest go first: a row runs as long as its sentence (up to ~8 s on an H200), and the
    stream ends only when its last row does.
    """
    return session.scalar(
        select(Batch.id).where(Batch.state == BatchState.QUEUED.value)
        .order_by(Batch.priority.desc(), Batch.created_at, Batch.longest_positions.desc(), Batch.id)
        .limit(1))


def queued_batch_count(session: Session) -> int:
    """How many batches wait in the queue."""
    return session.scalar(select(func.count(Batch.id)).where(Batch.state == BatchState.QUEUED.value)) or 0


def batch_needs_refine(session: Session, batch_id: int) -> bool:
    """Whether a job with sentences in the batch asked for upstream's refine pass."""
    options = session.scalars(select(Job.options).where(Job.id.in_(
        select(Sentence.job_id).where(Sentence.batch_id == batch_id).distinct())))
    return any(bool((o or {}).get("refine")) for o in options)


def take_over_batch(session: Session, batch_id: int, worker: str, dead_worker: str) -> Batch | None:
    """Take a running batch from a worker known to be dead (its process is gone from this host)."""
    now = utcnow()
    result = session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.state == BatchState.RUNNING.value, Batch.leased_by == dead_worker)
        .values(leased_by=worker, leased_at=now, heartbeat_at=now, attempts=Batch.attempts + 1)
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


def release_batch(session: Session, batch_id: int, worker: str, error: str) -> None:
    """Give a leased batch back to the queue after a transient failure."""
    session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.leased_by == worker)
        .values(state=BatchState.QUEUED.value, leased_by=None, heartbeat_at=None, error=error)
        .execution_options(synchronize_session=False)
    )


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


def queued_batches(session: Session) -> list[int]:
    return list(session.scalars(select(Batch.id).where(Batch.state == BatchState.QUEUED.value)))


# ---------------------------------------------------------------- progress


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


# ---------------------------------------------------------------- voices


def get_voice(session: Session, name: str) -> Voice | None:
    return session.scalar(select(Voice).where(Voice.name == name))


def list_voices(session: Session) -> list[Voice]:
    return list(session.scalars(select(Voice).order_by(Voice.name)))


def add_voice(session: Session, name: str, embedding: str, seed: int | None, source: str) -> Voice:
    voice = Voice(name=name, embedding=embedding, seed=seed, source=source)
    session.add(voice)
    session.flush()
    return voice


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


# ---------------------------------------------------------------- synthesis workers


def register_worker(session: Session, name: str, **fields: object) -> Worker:
    """Record (or refresh) a synthesis worker's device, limits and calibration at start-up."""
    worker = session.scalar(select(Worker).where(Worker.name == name))
    if worker is None:
        worker = Worker(name=name, **fields)
        session.add(worker)
    else:
        for key, value in fields.items():
            setattr(worker, key, value)
        worker.started_at = worker.seen_at = utcnow()
    session.flush()
    return worker


def lower_worker_max_rows(session: Session, name: str, rows: int) -> None:
    """Remember that a batch of more than ``rows`` ran out of memory on this worker."""
    session.execute(
        update(Worker).where(Worker.name == name, or_(Worker.max_rows.is_(None), Worker.max_rows > rows))
        .values(max_rows=rows, seen_at=utcnow())
        .execution_options(synchronize_session=False)
    )


def touch_worker(session: Session, name: str) -> None:
    session.execute(update(Worker).where(Worker.name == name).values(seen_at=utcnow())
                    .execution_options(synchronize_session=False))


def live_workers(session: Session, since: datetime) -> list[Worker]:
    return list(session.scalars(select(Worker).where(Worker.seen_at >= since).order_by(Worker.id)))

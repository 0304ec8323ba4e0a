"""Chapters and sentences: recorded at ingest, planned into batches, spoken. Each function takes the caller's Session and never commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, case, func, insert, select, update
from sqlalchemy.orm import Session

from pipeline.types import NARRATOR
from storage.models import Chapter, Job, JobState, Sentence, SentenceState
from storage.repo.statements import execute_many


@dataclass(frozen=True)
class NewSentence:
    index: int
    paragraph_index: int
    text: str
    seed: int
    min_new_tokens: int
    max_new_tokens: int
    role: str = NARRATOR


_GIVEN = ("job_id", "chapter_id", "index", "paragraph_index", "text", "seed", "min_new_tokens",
          "max_new_tokens", "role")
# what a new sentence row gets besides its NewSentence fields: the model's own defaults
_SENTENCE_DEFAULTS = {c.key: c.default.arg for c in Sentence.__table__.c
                      if c.default is not None and c.default.is_scalar and c.key not in _GIVEN}
_SENTENCE_KEYS = (*_GIVEN, *_SENTENCE_DEFAULTS)


def add_chapters(session: Session, job_id: int,
                 chapters: Sequence[tuple[int, str, Sequence[NewSentence]]]) -> list[Chapter]:
    """Record a book's chapters (index, title, sentences): one INSERT of the chapters, then one
    executemany of every sentence, no ORM objects (a 5,000-sentence book took 0.8 s as objects)."""
    rows = [Chapter(job_id=job_id, index=index, title=title) for index, title, _ in chapters]
    session.add_all(rows)
    session.flush()
    defaults = tuple(_SENTENCE_DEFAULTS.values())
    execute_many(session, insert(Sentence.__table__), _SENTENCE_KEYS, [
        (job_id, chapter.id, s.index, s.paragraph_index, s.text, s.seed, s.min_new_tokens, s.max_new_tokens,
         s.role, *defaults)
        for chapter, (_, _, sentences) in zip(rows, chapters) for s in sentences])
    return rows




def has_chapters(session: Session, job_id: int) -> bool:
    return chapter_count(session, job_id) > 0


def chapter_count(session: Session, job_id: int) -> int:
    return session.scalar(select(func.count()).select_from(Chapter).where(Chapter.job_id == job_id)) or 0


def job_chapters(session: Session, job_id: int) -> list[Chapter]:
    return list(session.scalars(select(Chapter).where(Chapter.job_id == job_id).order_by(Chapter.index)))


def chapter_sentences(session: Session, chapter_id: int) -> list[Sentence]:
    return list(session.scalars(
        select(Sentence).where(Sentence.chapter_id == chapter_id).order_by(Sentence.index)))


def job_sentence_audio(session: Session, job_id: int, chapter_ids: Sequence[int] | None = None
                       ) -> dict[int, list[tuple[str, int]]]:
    """(audio path, paragraph index) of every sentence with audio, by chapter id, in reading
    order: one query of three columns (assembly reads a whole book's worth; a stretch assembled
    ahead, its ``chapter_ids``)."""
    query = (select(Sentence.chapter_id, Sentence.audio_path, Sentence.paragraph_index)
             .where(Sentence.job_id == job_id, Sentence.audio_path.is_not(None)))
    if chapter_ids is not None:
        query = query.where(Sentence.chapter_id.in_(chapter_ids))
    rows = session.execute(query.order_by(Sentence.chapter_id, Sentence.index))
    by_chapter: dict[int, list[tuple[str, int]]] = {}
    for chapter_id, audio_path, paragraph_index in rows:
        by_chapter.setdefault(chapter_id, []).append((audio_path, paragraph_index))
    return by_chapter


def job_recorded_words(session: Session, job_id: int) -> list[tuple[int, int, str, str]]:
    """(chapter index, sentence index, text, audio path) of every sentence with audio, in reading
    order: one query of four columns (a read-along's words; building the 19,043 sentences of a
    25.8-hour book as objects, chapter by chapter, took ~0.8 s of its assembly's start)."""
    rows = session.execute(
        select(Chapter.index, Sentence.index, Sentence.text, Sentence.audio_path)
        .join(Chapter, Chapter.id == Sentence.chapter_id)
        .where(Sentence.job_id == job_id, Sentence.audio_path.is_not(None))
        .order_by(Chapter.index, Sentence.index))
    return [(chapter, index, text, path) for chapter, index, text, path in rows]


def longest_pending_sentence(session: Session, job_id: int) -> int:
    """The most GPT steps any of the job's unspoken sentences may take."""
    return session.scalar(select(func.max(Sentence.max_new_tokens)).where(
        Sentence.job_id == job_id, Sentence.audio_path.is_(None))) or 0


def spoken_chapter_prefix(session: Session, job_id: int) -> int:
    """How many of the job's first chapters, in reading order, have every sentence spoken."""
    unfinished = (select(Sentence.chapter_id).where(Sentence.job_id == job_id, Sentence.audio_path.is_(None))
                  .distinct())
    first_unfinished = session.scalar(select(func.min(Chapter.index)).where(
        Chapter.job_id == job_id, Chapter.id.in_(unfinished)))
    return chapter_count(session, job_id) if first_unfinished is None else session.scalar(
        select(func.count()).select_from(Chapter).where(Chapter.job_id == job_id,
                                                        Chapter.index < first_unfinished)) or 0


def job_sentence_audio_paths(session: Session, job_id: int) -> list[str]:
    """The audio path every recorded sentence of the job points at (relative to the data dir)."""
    return list(session.scalars(select(Sentence.audio_path).where(
        Sentence.job_id == job_id, Sentence.audio_path.is_not(None))))


def unplanned_sentences(session: Session, job_ids: Sequence[int] | None = None) -> list[Any]:
    """Pending sentences of active jobs that no live batch holds, locked against other planners:
    rows of what the planner reads (id, job_id, chapter_id, text, max_new_tokens), not whole ORM objects
    (building 10,000 of those was half of planning two books).

    On PostgreSQL the rows are locked FOR UPDATE SKIP LOCKED, so concurrent planners split the work
    instead of planning the same sentence twice. (SQLite ignores the clause; it has one writer.)
    """
    query = _unplanned(select(Sentence.id, Sentence.job_id, Sentence.chapter_id, Sentence.text,
                              Sentence.max_new_tokens), job_ids)
    return list(session.execute(query.order_by(Sentence.id).with_for_update(skip_locked=True, of=Sentence)))


def has_unplanned_sentences(session: Session, job_ids: Sequence[int] | None = None) -> bool:
    """Whether ``unplanned_sentences`` may find any (rows another planner holds count), locking nothing."""
    return session.scalar(_unplanned(select(Sentence.id), job_ids).limit(1)) is not None


def _unplanned(query: Select, job_ids: Sequence[int] | None) -> Select:
    query = (query.join(Job, Job.id == Sentence.job_id)
             .where(Sentence.state == SentenceState.PENDING.value, Sentence.batch_id.is_(None),
                    Job.state == JobState.SYNTHESIZING.value))
    return query if job_ids is None else query.where(Sentence.job_id.in_(job_ids))


def shares_left_to_plan(session: Session, job_ids: Iterable[int]) -> dict[int, float]:
    """Of ``job_ids``, the books planned in part: the share of each one's GPT steps
    (``max_new_tokens``) in sentences no batch holds yet."""
    unplanned = func.sum(case((Sentence.batch_id.is_(None), Sentence.max_new_tokens), else_=0))
    rows = session.execute(select(Sentence.job_id, unplanned, func.sum(Sentence.max_new_tokens))
                           .where(Sentence.job_id.in_(list(job_ids))).group_by(Sentence.job_id))
    return {job_id: left / total for job_id, left, total in rows if total and left < total}


def longest_unplanned_span(session: Session, job_id: int) -> int:
    """The most characters of text plus GPT steps of any of the job's sentences no batch holds
    yet (a batch's positions are its longest prompt's plus steps: ``jobs.plan``)."""
    return session.scalar(select(func.max(func.length(Sentence.text) + Sentence.max_new_tokens)).where(
        Sentence.job_id == job_id, Sentence.batch_id.is_(None),
        Sentence.state == SentenceState.PENDING.value)) or 0


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

"""The job table and its children: the source of truth for every book in flight.

job ─< chapter ─< sentence >─ batch        voice (named speaker embeddings)

States are ``str`` enums stored as readable text. The allowed transitions live next to each enum.
"""

from __future__ import annotations

import enum
from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from pipeline.types import NARRATOR

# Named constraints so Alembic can diff and alter them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class JobState(str, enum.Enum):
    """A book's journey. ``done``, ``failed``, ``cancelled`` and ``interrupted`` are final: nothing
    moves them but a user's command (`retry`, or `run` of the same book for ``interrupted``)."""

    QUEUED = "queued"  # recorded; waiting for ingestion
    INGESTING = "ingesting"
    SYNTHESIZING = "synthesizing"
    ASSEMBLING = "assembling"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # its `tts-jobs run` stopped (Ctrl-C, a signal, a crash); resumable

    @property
    def is_final(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)

    @classmethod
    def active(cls) -> tuple[JobState, ...]:
        return tuple(s for s in cls if not s.is_final)


class SentenceState(str, enum.Enum):
    PENDING = "pending"  # no audio yet
    DONE = "done"  # audio written and recorded
    FAILED = "failed"  # gave up: the job fails with the reason


class BatchState(str, enum.Enum):
    QUEUED = "queued"  # planned, message sent
    RUNNING = "running"  # leased by a worker (see leased_by / heartbeat_at)
    DONE = "done"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self in (BatchState.DONE, BatchState.FAILED)


class JobMode(str, enum.Enum):
    """Who moves a job: the workers of a cluster, or the one `tts-jobs run` process that made it."""

    CLUSTER = "cluster"
    EMBEDDED = "embedded"


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED.value, index=True)
    source_name: Mapped[str] = mapped_column(Text)  # the file name the user gave, for display
    source_path: Mapped[str] = mapped_column(Text)  # the stored copy, relative to the data dir
    source_sha256: Mapped[str] = mapped_column(String(64), index=True)
    book_format: Mapped[str] = mapped_column(String(8))
    title: Mapped[str] = mapped_column(Text, default="")
    authors: Mapped[list] = mapped_column(JSON, default=list)
    language: Mapped[str] = mapped_column(String(35), default="")
    book_metadata: Mapped[dict] = mapped_column(JSON, default=dict)  # publisher, date, description, cover
    priority: Mapped[int] = mapped_column(Integer, default=0)
    voice_name: Mapped[str] = mapped_column(String(64))
    voice_embedding: Mapped[str] = mapped_column(Text)  # frozen at submit: later voice edits don't change it
    options: Mapped[dict] = mapped_column(JSON, default=dict)  # formats, output dir, pauses, ...
    outputs: Mapped[list] = mapped_column(JSON, default=list)  # finished files, absolute paths
    report: Mapped[dict] = mapped_column(JSON, default=dict)  # assembly: durations, chapter starts
    warnings: Mapped[list] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    mode: Mapped[str] = mapped_column(String(16), default=JobMode.CLUSTER.value,
                                      server_default=JobMode.CLUSTER.value)
    # the process (host:pid) working on the job now — an embedded job's `run`, or the worker that
    # holds its ingest or assembly — and its heartbeat: a dead pid on this host or a stale heartbeat
    # means the process is gone (SIGKILL, power loss) and the work is taken over
    runner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # the last message sent for the job's current stage, and how many: the reconciler resends a
    # stage nothing will move, throttled by these (jobs/cluster/reconcile.py)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    sends: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    chapters: Mapped[list[Chapter]] = relationship(
        back_populates="job", cascade="all, delete-orphan", order_by="Chapter.index"
    )

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)

    @property
    def embedded(self) -> bool:
        return self.mode == JobMode.EMBEDDED.value


class Chapter(Base):
    __tablename__ = "chapters"
    __table_args__ = (UniqueConstraint("job_id", "index", name="uq_chapters_job_id_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text, default="")

    job: Mapped[Job] = relationship(back_populates="chapters")
    sentences: Mapped[list[Sentence]] = relationship(
        back_populates="chapter", cascade="all, delete-orphan", order_by="Sentence.index"
    )


class Sentence(Base):
    __tablename__ = "sentences"
    __table_args__ = (
        UniqueConstraint("chapter_id", "index", name="uq_sentences_chapter_id_index"),
        Index("ix_sentences_job_id_state", "job_id", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    chapter_id: Mapped[int] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)  # order within the chapter
    paragraph_index: Mapped[int] = mapped_column(Integer)  # -1: the chapter title
    text: Mapped[str] = mapped_column(Text)
    # whose voice reads it: the narrator's, or (a job with a dialogue voice) quoted speech's
    role: Mapped[str] = mapped_column(String(16), default=NARRATOR, server_default=NARRATOR)
    seed: Mapped[int] = mapped_column(Integer)  # from the book's content and the sentence's place
    min_new_tokens: Mapped[int] = mapped_column(Integer)
    max_new_tokens: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default=SentenceState.PENDING.value)
    batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("batches.id", ondelete="SET NULL"), nullable=True, index=True
    )
    audio_path: Mapped[str | None] = mapped_column(Text, nullable=True)  # relative to the data dir
    audio_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpt_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    hit_limit: Mapped[bool] = mapped_column(Boolean, default=False)  # stopped at max_new_tokens
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    chapter: Mapped[Chapter] = relationship(back_populates="sentences")


class Batch(Base):
    """The unit a GPU worker takes. Leased through ``leased_by``/``heartbeat_at`` while running."""

    __tablename__ = "batches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default=BatchState.QUEUED.value, index=True)
    size: Mapped[int] = mapped_column(Integer)
    estimated_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    # the order a streaming worker takes queued batches in (storage/repo.next_queued_batch)
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # its book's submission (the job's created_at; a submit's books share it) and how many GPT
    # steps the whole book may take: submissions in turn, the larger book of one first
    submitted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    book_steps: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    longest_positions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # claims
    failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # errors raised speaking it
    # deaths of the process holding it: any (the batch then runs alone, never in a stream), and
    # those that count against it as a poison batch: it was the only batch its holder ran, and
    # only the holder died, not its whole worker
    holder_deaths: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    solo_deaths: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # its last message
    leased_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # the holder's parent (host:pid, the Celery worker's main process): alive when the holder
    # dies means the pool child alone died, of what it ran; dead too means the whole worker went
    holder_parent: Mapped[str | None] = mapped_column(String(255), nullable=True)
    leased_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)  # one per plan
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Voice(Base):
    """A named ChatTTS speaker embedding."""

    __tablename__ = "voices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    embedding: Mapped[str] = mapped_column(Text)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source: Mapped[str] = mapped_column(Text, default="")  # "seed N" or the reference recording
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BulkEntry(Base):
    """A book a bulk run has submitted, by content: the UNIQUE hash makes double submission impossible."""

    __tablename__ = "bulk_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str] = mapped_column(Text)  # where it was first seen
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Worker(Base):
    """A synthesis worker as it announced itself at start-up: device, limits and calibration.

    The planner (which runs on a CPU worker, far from any GPU) cuts batches to the smallest memory
    cap among live synthesis workers, with their calibrated memory model and any batch size that
    ran out of memory (``max_rows``, learned by OOM halving).
    """

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    device: Mapped[str] = mapped_column(String(64))
    precision: Mapped[str] = mapped_column(String(16))
    model_dir: Mapped[str] = mapped_column(Text, default="")
    memory_cap_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # None: no cap (CPU)
    fixed_bytes: Mapped[int] = mapped_column(BigInteger)
    bytes_per_row_position: Mapped[int] = mapped_column(BigInteger)
    max_rows: Mapped[int | None] = mapped_column(Integer, nullable=True)  # learned from OOM
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

"""Bulk runs' entries: one row per book content submitted from an inbox (``sha256`` is UNIQUE, so
two overlapping runs cannot both record a book)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from storage.models import BulkEntry, Job


def bulk_entry(session: Session, sha256: str) -> BulkEntry | None:
    """The entry of a book content submitted before, if there is one."""
    return session.scalar(select(BulkEntry).where(BulkEntry.sha256 == sha256))


def add_bulk_entry(session: Session, sha256: str, path: str) -> BulkEntry:
    """Insert a book content's entry now (flushed): on PostgreSQL a rival run's insert of the same
    content waits here for this transaction, then raises IntegrityError."""
    entry = BulkEntry(sha256=sha256, path=path)
    session.add(entry)
    session.flush()
    return entry


def delete_bulk_entry(session: Session, sha256: str) -> None:
    session.execute(delete(BulkEntry).where(BulkEntry.sha256 == sha256))


def bulk_jobs_in(session: Session, states: Sequence[str]) -> list[Job]:
    """The jobs recorded by bulk runs that are in one of ``states``, oldest first."""
    query = (select(Job).join(BulkEntry, BulkEntry.job_id == Job.id)
             .where(Job.state.in_(states)).order_by(Job.id))
    return list(session.execute(query).scalars())

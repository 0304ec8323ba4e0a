"""Read-only sessions: on SQLite they read beside a writer instead of queueing for its lock."""

from __future__ import annotations

import time

from sqlalchemy import func, select

from jobs.runtime import open_runtime
from storage.models import Job


def test_a_read_session_does_not_wait_for_a_writer(settings_factory, database_url: str) -> None:  # type: ignore[no-untyped-def]
    """An assembly reading its book's sentences while a GPU worker records a batch (SQLite's
    write lock held, or a PostgreSQL row lock) gets its rows at once, not after the writer."""
    rt = open_runtime(settings_factory(database_url), upgrade_schema=True)
    with rt.session() as writer:
        writer.add(Job(source_name="a.txt", source_path="", source_sha256="0", book_format="txt", title="A",
                       authors=[], language="en", priority=0, voice_name="default", voice_embedding="",
                       options={}, warnings=[]))
        writer.flush()  # the write transaction is open (on SQLite: BEGIN IMMEDIATE, lock held)
        began = time.monotonic()
        with rt.read_session() as reader:
            assert reader.scalar(select(func.count(Job.id))) == 0  # the writer's row is not committed
        assert time.monotonic() - began < 1.0
        writer.commit()
    with rt.read_session() as reader:
        assert reader.scalar(select(func.count(Job.id))) == 1

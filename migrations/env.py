"""Alembic environment: targets storage.models.Base.metadata."""

from __future__ import annotations

from alembic import context

from storage.db import make_engine
from storage.models import Base

target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=context.config.get_main_option("sqlalchemy.url"),
                      target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(context.config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    # render_as_batch: SQLite can only ALTER by "move and copy".
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

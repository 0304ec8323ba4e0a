"""The schema the migrations build is the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from storage.db import current_revision, head_revision, make_engine
from storage.models import Base


def test_migrations_reach_head_and_match_the_models(database_url: str) -> None:
    """Fails when someone changes storage/models.py without writing a migration (like `alembic check`)."""
    engine = make_engine(database_url)
    try:
        assert current_revision(engine) == head_revision(database_url)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
        assert diff == [], f"models and migrations drifted apart: {diff}"
    finally:
        engine.dispose()


def test_the_revision_a_current_database_is_recognised_by_is_alembics_head(database_url: str) -> None:
    """``SCHEMA_HEAD`` (what lets a command skip the migrations) is the newest migration: a new one
    without it changed would leave every embedded database behind its code."""
    from storage.db import SCHEMA_HEAD, stored_revision

    assert SCHEMA_HEAD == head_revision(database_url)
    assert stored_revision(database_url) == SCHEMA_HEAD

"""The schema the migrations build is the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def _schema(url: str) -> dict:
    """Every table's columns (type, nullability, server default), indexes, foreign keys and
    unique constraints, as SQLAlchemy reads them back from the database."""
    from sqlalchemy import inspect

    engine = make_engine(url)
    try:
        found = inspect(engine)
        return {table: (
            sorted((c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in found.get_columns(table)),
            sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in found.get_indexes(table)),
            sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]),
                    str(f.get("options"))) for f in found.get_foreign_keys(table)),
            sorted(tuple(u["column_names"]) for u in found.get_unique_constraints(table)),
        ) for table in found.get_table_names()}
    finally:
        engine.dispose()


def test_a_new_sqlite_database_made_without_alembic_is_the_one_the_migrations_make(tmp_path: Path) -> None:
    from storage.db import SCHEMA_HEAD, stored_revision, upgrade, upgrade_if_behind

    migrated, made = f"sqlite:///{tmp_path / 'migrated.db'}", f"sqlite:///{tmp_path / 'made.db'}"
    upgrade(migrated)
    upgrade_if_behind(made)

    assert stored_revision(made) == SCHEMA_HEAD == stored_revision(migrated)
    assert _schema(made) == _schema(migrated)
    engine = make_engine(made)
    try:
        assert current_revision(engine) == head_revision(made)  # Alembic sees it at head: nothing to run
    finally:
        engine.dispose()


def test_a_first_run_makes_its_database_without_importing_alembic(tmp_path: Path) -> None:
    # Alembic's import and every migration were 0.44 s of a user's first `run` before the model loads
    code = ("import sys; from storage.db import upgrade_if_behind; "
            f"upgrade_if_behind('sqlite:///{tmp_path / 'jobs.db'}'); print('alembic' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert shown.stdout.strip() == "False"


def test_a_database_with_tables_but_no_revision_is_left_to_alembic(tmp_path: Path) -> None:
    from sqlalchemy import text

    from storage.db import create_new_sqlite

    url = f"sqlite:///{tmp_path / 'other.db'}"
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE notes (body TEXT)"))
    engine.dispose()

    assert create_new_sqlite(url) is False

"""Engines, sessions and schema upgrades. No module-level engine: callers build one from settings."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

import migrations


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://user@host/db`` URLs and use the driver the project installs."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin_immediate)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    # WAL lets `tts-jobs status` read while a run writes; foreign keys are off by default in SQLite.
    dbapi_connection.isolation_level = None  # let the "begin" hook issue BEGIN itself
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


READ_ONLY = "tts_jobs_read_only"  # execution option: a transaction that only reads


def _sqlite_begin_immediate(connection) -> None:  # type: ignore[no-untyped-def]
    # A deferred read->write upgrade fails at once with "database is locked" instead of waiting;
    # taking the write lock up front makes the busy timeout apply. A transaction that only reads
    # (READ_ONLY) begins deferred: under WAL it reads beside the writer instead of queueing for
    # the write lock behind every ingest, claim and record.
    read_only = connection.get_execution_options().get(READ_ONLY, False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def make_read_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions for transactions that only read (on SQLite they take no write lock; a write in
    one fails at once with "database is locked")."""
    return sessionmaker(engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


# The newest migration's revision (migrations/versions). A database already there is not upgraded,
# and Alembic is not imported: ~0.15 s of every command's start on the build machine, more on
# a slower host. tests/test_migrations.py holds it to Alembic's head.
SCHEMA_HEAD = "0008"


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (Alembic)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def upgrade_if_behind(url: str) -> None:
    """Bring the schema to the newest revision, unless it is there already (one query); a new
    SQLite database gets it from the models at once (``create_new_sqlite``)."""
    revision = stored_revision(url)
    if revision == SCHEMA_HEAD:
        return
    if revision is None and normalize_url(url).startswith("sqlite") and create_new_sqlite(url):
        return
    upgrade(url)


def create_new_sqlite(url: str) -> bool:
    """An SQLite database without tables given the newest schema from the models, stamped with
    its revision as Alembic stamps it, in one transaction that holds the write lock (a second
    process waits, then finds it made); returns False, doing nothing, where there are tables.

    Why not Alembic: importing it and running every migration took 0.44 s on the build machine,
    on a user's first `tts-jobs run` before the model began to load. tests/test_migrations.py
    holds the models to the migrations' schema."""
    from storage.models import Base

    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            tables = "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            if connection.exec_driver_sql(tables).scalar():
                return False
            Base.metadata.create_all(connection)
            connection.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                                       "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))")
            connection.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES (?)", (SCHEMA_HEAD,))
        return True
    finally:
        engine.dispose()


def stored_revision(url: str) -> str | None:
    """The revision the database at ``url`` records (None: none yet, or no database)."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except Exception:  # noqa: BLE001 - no table, no file, locked: the upgrade finds out properly
        return None
    finally:
        engine.dispose()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(url: str) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()

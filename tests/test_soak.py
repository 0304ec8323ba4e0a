"""A short soak in CI: four books, two real workers, one SIGKILLed (whole process group) at random.

The full run is `scripts/soak [--books 20] [--minutes N]`; both use `tests/soak.py`. TINY SYNTHETIC
weights: the audiobooks are noise, never speech.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import env_for
from tests.e2e_helpers import cli
from tests.soak import SoakConfig, run_soak, soak_env


def _wipe(database_url: str) -> None:
    from storage.db import make_engine
    from storage.models import Base

    engine = make_engine(database_url)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_books_submitted_at_once_all_finish_while_a_worker_is_killed_at_random(
        tmp_path: Path, pg_database: str, redis_url: str, settings_factory) -> None:  # type: ignore[no-untyped-def]
    settings = settings_factory(pg_database, broker_url=redis_url)
    env = soak_env(env_for(settings), lease_seconds=10, visibility_timeout=30)
    upgraded = cli(["db", "upgrade"], env, timeout=180)
    assert upgraded.returncode == 0, upgraded.stderr
    _wipe(pg_database)  # the session's database is shared: start from an empty job table
    try:
        report = run_soak(env, tmp_path / "soak",
                          SoakConfig(books=4, minutes=5, seed=8, kill_after=(3.0, 15.0), aim_seconds=10.0))
    finally:
        _wipe(pg_database)
    print(report.summary())
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                     for p in sorted((tmp_path / "soak").glob("*.log")))
    assert report.kills, f"the victim worker was never killed\n{report.summary()}\n{logs}"
    assert report.ok, f"{report.summary()}\n{logs}"

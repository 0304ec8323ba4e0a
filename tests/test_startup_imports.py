"""The start-up budget, read from Python's own import log (PYTHONPROFILEIMPORTTIME), not a stopwatch:
what a command imports costs the same on a loaded machine as on an idle one."""

from __future__ import annotations

from pathlib import Path

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli

# Packages whose import costs seconds and whose modules the engine does not run: ChatTTS pulls in
# transformers' Llama and vector_quantize_pytorch (einx); the engine reads their weights itself.
UPSTREAM_ONLY = {"ChatTTS", "transformers", "vector_quantize_pytorch", "einx", "vocos", "torchaudio"}


def imported(stderr: str) -> set[str]:
    """Every module the process imported, from the import log on stderr."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


def test_a_run_speaks_a_book_without_importing_upstreams_packages(tmp_path: Path,
                                                                 settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PYTHONPROFILEIMPORTTIME": "1"}
    book = write_epub(tmp_path / "book.epub", "Brief", [("Only", ["One sentence.", "Two of them."])])

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "wav"], env)

    assert result.returncode == 0, result.stderr[-2000:]
    modules = imported(result.stderr)
    assert {"torch", "pipeline.engine.loading", "pipeline.engine.modules.llama"} <= modules  # it loaded
    assert not UPSTREAM_ONLY & modules
    # an EPUB's reader alone of the formats': the others load when a book of theirs is read
    assert "pipeline.ingest.epub.chapters" in modules
    assert not {"pipeline.ingest.pdf", "pipeline.ingest.docx", "pipeline.ingest.kindle", "pipeline.ingest.odt",
                "pipeline.ingest.fb2"} & modules


def test_run_help_imports_neither_torch_nor_the_engine(settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PYTHONPROFILEIMPORTTIME": "1"}

    result = cli(["run", "--help"], env)

    assert result.returncode == 0, result.stderr[-2000:]
    modules = imported(result.stderr)
    assert "jobs.cli" in modules or "typer" in modules  # the log is there to read
    assert not {"torch", "pipeline.engine"} & modules
    assert not UPSTREAM_ONLY & modules
    # nor the database, Celery, numpy or the text and audio stages: help is the CLI's alone
    assert not {"sqlalchemy", "celery", "numpy", "pipeline.text.normalize", "pipeline.audio.assemble"} & modules


def test_a_command_on_a_database_already_at_the_newest_schema_does_not_load_the_migrations(
        settings_factory) -> None:  # type: ignore[no-untyped-def]
    """Once the schema is built (Alembic), a command finds the newest revision recorded and leaves
    Alembic unloaded (~0.15 s of each command's start)."""
    env = {**env_for(settings_factory()), "PYTHONPROFILEIMPORTTIME": "1"}

    first = cli(["db", "upgrade"], env)
    later = cli(["status"], env)

    assert first.returncode == 0 and later.returncode == 0, later.stderr[-2000:]
    assert "alembic" in imported(first.stderr)  # built the schema
    assert "alembic" not in imported(later.stderr) and "sqlalchemy" in imported(later.stderr)

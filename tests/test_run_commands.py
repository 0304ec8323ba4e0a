"""`tts-jobs run`, `submit`, `status`, `cancel` and `retry` as a user meets them around resuming:
a book run again, books that never share a folder, bad options and a broker that is down refused
before anything loads or is recorded. Real processes (the command in a subprocess, tiny ChatTTS
weights on CPU, real ffmpeg).

Apart from tests/test_resume.py (the stopped and resumed runs) so that the two run side by side:
`scripts/test` keeps a module in one test process.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, status_json


def test_fresh_starts_over_and_the_old_run_is_not_resumed(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "Brief", [("Only", ["One sentence.", "Two sentences."])])
    first = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "wav"], env)
    again = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "wav", "--fresh"], env)

    assert first.returncode == again.returncode == 0, again.stderr
    assert [j["id"] for j in status_json(env)] == [2, 1]  # a done book is run again as a new job
    assert first.stdout == again.stdout  # into its own folder, replacing its own files


def test_bad_options_are_refused_before_the_model_loads(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    # Python's own import log (PYTHONPROFILEIMPORTTIME) says what the command loaded: neither
    # torch nor the engine's model code, whatever the machine's speed (a wall-clock bound failed
    # under load). The engine's light modules (its choices, where weights lie) may check the options.
    env = {**env_for(settings_factory()), "PYTHONPROFILEIMPORTTIME": "1"}
    book = write_epub(tmp_path / "book.epub", "Brief", [("Only", ["One sentence."])])
    for options, problem in ((["-f", "xyz"], "unknown output format xyz"), (["--voice", "nobody"], "unknown voice")):
        result = cli(["run", str(book), *options], env)

        assert result.returncode == 2, result.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "jobs.cli" in imported or "typer" in imported  # the log is there to read
        assert not {"torch", "ChatTTS", "pipeline.engine.engine", "pipeline.engine.loading"} & imported
        errors = [line for line in result.stderr.splitlines()
                  if line.strip() and not line.startswith("import time:")]
        assert errors == [next(e for e in errors if e.startswith("error:"))] and problem in errors[0]
    assert status_json(env) == []  # nothing recorded


@pytest.mark.parametrize("command", [["status", "99999"], ["cancel", "99999"], ["retry", "99999"]])
def test_a_job_that_does_not_exist_reads_the_same_everywhere(settings_factory, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = cli(command, env_for(settings_factory()))
    assert result.returncode == 2
    assert result.stderr.strip() == "error: no job 99999: see `tts-jobs status` for the list"


def test_books_never_share_a_folder(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """Two books with one title and different authors, and two with identical metadata but other
    content, run into one --out: four folders, and no book's files overwritten by another."""
    env = env_for(settings_factory())
    out = tmp_path / "out"
    books = [
        write_epub(tmp_path / "a.epub", "Twins", [("One", ["Told by the first author."])], author="Ann Able"),
        write_epub(tmp_path / "b.epub", "Twins", [("One", ["Told by the second author."])], author="Ben Bold"),
        write_epub(tmp_path / "c.epub", "Same", [("One", ["The first edition's words."])], author="Cy Cole"),
        write_epub(tmp_path / "d.epub", "Same", [("One", ["The second edition, revised."])], author="Cy Cole"),
    ]
    outputs = []
    for book in books:
        result = cli(["run", str(book), "--out", str(out), "-f", "mp3"], env)
        assert result.returncode == 0, result.stderr
        outputs.append(Path(result.stdout.strip()))
        if len(outputs) == 1:
            first_bytes = outputs[0].read_bytes()

    folders = [o.parent for o in outputs]
    assert len(set(folders)) == 4
    assert folders[0] == out / "Ann Able" / "Twins" and folders[1] == out / "Ben Bold" / "Twins"
    assert folders[2] == out / "Cy Cole" / "Same" and folders[3].parent == out / "Cy Cole"
    assert folders[3].name.startswith("Same (")
    assert outputs[0].read_bytes() == first_bytes
    assert all(o.is_file() for o in outputs)
    statuses = {s["id"]: s for s in status_json(env)}
    assert [statuses[i + 1]["outputs"] for i in range(4)] == [[str(o)] for o in outputs]


def test_a_book_run_again_replaces_only_its_own_files(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    out = tmp_path / "out"
    book = write_epub(tmp_path / "a.epub", "Again", [("One", ["Read twice."])], author="Ann Able")
    other = write_epub(tmp_path / "b.epub", "Other", [("One", ["Read once."])], author="Ann Able")
    first = cli(["run", str(book), "--out", str(out), "-f", "wav"], env)
    folder = Path(first.stdout.strip()).parent
    files_after_first = sorted(p.name for p in folder.iterdir())
    kept = cli(["run", str(other), "--out", str(out), "-f", "wav"], env)
    kept_bytes = Path(kept.stdout.strip()).read_bytes()
    again = cli(["run", str(book), "--out", str(out), "-f", "wav", "--fresh"], env)

    assert first.stdout == again.stdout and again.returncode == 0
    assert Path(kept.stdout.strip()).read_bytes() == kept_bytes
    assert Path(kept.stdout.strip()).parent != folder
    assert sorted(p.name for p in folder.iterdir()) == files_after_first  # replaced, nothing left over


def _one_error_line(result: subprocess.CompletedProcess) -> str:  # type: ignore[type-arg]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_submit_with_the_broker_down_leaves_nothing_behind(tmp_path: Path, settings_factory, database_url: str) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory(database_url)), "TTS_JOBS_BROKER_URL": "redis://:secret@127.0.0.1:1/0"}
    books = [write_epub(tmp_path / f"{n}.epub", n, [("One", ["A sentence."])]) for n in ("First", "Second")]

    result = cli(["submit", *map(str, books)], env)

    assert result.returncode == 2
    line = _one_error_line(result)
    assert line == ("error: cannot reach the broker at redis://:**@127.0.0.1:1/0: connection refused "
                    "(start Redis, or set TTS_JOBS_BROKER_URL)")
    assert status_json(env) == []
    assert not (tmp_path / "out").exists()


def test_retry_with_the_broker_down_leaves_the_job_as_it_was(tmp_path: Path, settings_factory,  # type: ignore[no-untyped-def]
                                                            database_url: str) -> None:
    from jobs.choices.options import JobOptions
    from jobs.lifecycle import fail_job
    from jobs.runtime import open_runtime
    from jobs.submit import submit_book

    settings = settings_factory(database_url)
    rt = open_runtime(settings, upgrade_schema=False)
    job_id = submit_book(rt, write_epub(tmp_path / "b.epub", "Failed", [("One", ["A sentence."])]), JobOptions())
    fail_job(rt, job_id, "disk full")
    env = {**env_for(settings), "TTS_JOBS_BROKER_URL": "redis://127.0.0.1:1/0"}

    result = cli(["retry", str(job_id)], env)

    assert result.returncode == 2
    assert _one_error_line(result).startswith("error: cannot reach the broker at redis://127.0.0.1:1/0")
    [job] = status_json(env)
    assert job["state"] == "failed" and job["error"] == "disk full"

"""Every mistake a command can see in its options and paths ends it before anything loads or is
recorded: one `error:` line naming the problem and the fix, exit 2, no model loaded (Python's own
import log says torch was never imported), no job and no voice left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, status_json


@pytest.fixture()
def env(settings_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return env_for(settings_factory())


@pytest.fixture()
def book(tmp_path: Path) -> Path:
    return write_epub(tmp_path / "book.epub", "Checked", [("One", ["A sentence to read."])])


def refused(args: list[str], env: dict[str, str], *words: str) -> str:
    """Run the command; it must end with exit 2 and one error line holding ``words``, torch never
    imported. Returns that line."""
    result = cli(args, {**env, "PYTHONPROFILEIMPORTTIME": "1"}, timeout=120)
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("import time:")]
    assert result.returncode == 2, (args, result.returncode, said)
    assert len(said) == 1 and said[0].startswith("error: "), (args, said)
    assert all(word in said[0] for word in words), (args, said[0])
    assert "torch" not in imported and "ChatTTS" not in imported, args  # refused before the model
    assert "╭" not in result.stderr and "Traceback" not in result.stderr
    return said[0]


def test_paths_that_cannot_be_written_or_read_are_refused_first(tmp_path: Path, env, book: Path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "no" / "such" / "folder"
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")

    refused(["preview", str(book), "-o", str(missing / "sample.wav")], env, str(missing))
    refused(["voice", "new", "anna", "--from-audio", str(tmp_path / "missing.wav")], env, "missing.wav")
    refused(["voice", "new", "anna", "--seed", "7", "--sample", str(missing / "anna.wav")], env, str(missing))
    refused(["run", str(book), "--out", str(a_file)], env, str(a_file))
    refused(["run", str(book), "--out", str(a_file / "library")], env, str(a_file))

    listed = cli(["voice", "list"], env)
    assert "anna" not in listed.stdout  # the refused voice was not made
    assert status_json(env) == []  # and no job recorded


@pytest.mark.parametrize("name", ["", "   ", "bad/name"])
def test_a_voice_name_no_file_or_listing_could_hold_is_refused(env, name: str) -> None:  # type: ignore[no-untyped-def]
    refused(["voice", "new", name, "--seed", "3"], env, "voice name")


def test_engine_choices_and_values_of_the_wrong_kind_are_refused_before_a_job_is_recorded(  # type: ignore[no-untyped-def]
        env, book: Path) -> None:
    refused(["run", str(book), "--precision", "fp8"], env, "fp8")
    refused(["run", str(book), "--device", "tpu"], env, "tpu")
    refused(["run", str(book), "--speed", "fast"], env, "--speed", "fast")
    refused(["inspect", str(book), "--dialogue-voice", "nobody"], env, "nobody", "voice new nobody")
    refused(["run", str(book), "--dialogue-voice", "nobody"], env, "nobody")
    assert status_json(env) == []


def test_a_taken_voice_name_is_refused_and_the_voice_kept(env) -> None:  # type: ignore[no-untyped-def]
    made = cli(["voice", "new", "nora", "--seed", "5"], env)
    assert made.returncode == 0, made.stderr

    refused(["voice", "new", "nora", "--seed", "6"], env, "nora")

    assert "seed 5" in next(line for line in cli(["voice", "list"], env).stdout.splitlines() if "nora" in line)

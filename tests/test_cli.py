"""The command line as a user meets it: the embedded `run`, status, and the error paths."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import (
    assert_duration_matches_sentences_plus_pauses,
    cli,
    ffprobe_chapters,
    status_json,
)

CHAPTERS = [
    ("The Beginning", ["It was a bright cold day in April.", "The clocks were striking thirteen."]),
    ("第二章 河岸", ["爱丽丝靠着姐姐坐在河岸边，很久没有事情可做。"]),
]


def test_run_converts_a_book_on_the_embedded_default(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """`tts-jobs run` with SQLite only: an M4B with one chapter mark per chapter, status says done."""
    settings = settings_factory()
    env = env_for(settings)
    env.pop("TTS_JOBS_BROKER_URL")  # the embedded default needs no broker
    book = write_epub(tmp_path / "book.epub", "A Small Book", CHAPTERS)

    result = cli(["run", str(book), "--out", str(tmp_path / "out")], env)

    assert result.returncode == 0, result.stderr
    output = Path(result.stdout.strip().splitlines()[-1])
    assert output.is_file() and output.suffix == ".m4b"
    assert output.parent == tmp_path / "out" / "Test Author" / "A Small Book"  # OUT/<Author>/<Title>
    [status] = status_json(env)
    assert status["state"] == "done"
    assert status["sentences_done"] == status["sentences_total"] > 0
    assert status["outputs"] == [str(output)]
    assert [c["tags"]["title"] for c in ffprobe_chapters(output)] == ["The Beginning", "第二章 河岸"]
    assert_duration_matches_sentences_plus_pauses(output, status, settings.data_dir)


def test_run_writes_one_mp3_per_chapter(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "A Small Book", CHAPTERS)

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "--format", "mp3"], env)

    assert result.returncode == 0, result.stderr
    outputs = [Path(line) for line in result.stdout.splitlines()]
    assert len(outputs) == 2 and all(p.suffix == ".mp3" and p.is_file() for p in outputs)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _corrupt_epub(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("META-INF/container.xml", "<container><rootfiles><rootfile full-path='missing.opf'/>")
    return path


@pytest.mark.parametrize("command", ["submit", "run"])
@pytest.mark.parametrize("make_book, problem", [
    (lambda d: d / "nowhere.epub", "no such file"),
    (lambda d: _write(d / "book.rtf", b"{\\rtf1 not really}"), "unsupported"),
    (lambda d: _corrupt_epub(d / "broken.epub"), "broken.epub"),
])
def test_bad_books_fail_with_one_line_and_exit_code_2(tmp_path: Path, settings_factory, command, make_book,  # type: ignore[no-untyped-def]
                                                      problem) -> None:
    env = env_for(settings_factory())
    book = make_book(tmp_path)

    result = cli([command, str(book)], env, timeout=120)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and problem in errors[0] and book.name in errors[0]
    assert all(job["state"] in ("done", "failed", "cancelled") for job in status_json(env))


def test_submit_reports_each_bad_book_and_queues_the_good_ones(tmp_path: Path, settings_factory,  # type: ignore[no-untyped-def]
                                                               redis_url: str) -> None:
    env = env_for(settings_factory())
    good = write_epub(tmp_path / "good.epub", "Good", CHAPTERS)

    result = cli(["submit", str(good), str(tmp_path / "missing.txt")], env)

    assert result.returncode == 2
    assert result.stdout.split() == ["1"]
    assert "missing.txt" in result.stderr
    [job] = status_json(env)
    assert job["state"] == "queued" and job["title"] == "Good"


def test_status_of_an_unknown_job_is_a_clear_error(settings_factory) -> None:  # type: ignore[no-untyped-def]
    result = cli(["status", "42"], env_for(settings_factory()))
    assert result.returncode == 2 and "no job 42" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("notes, chapters_read, warned", [
    ("end", 3, False), ("chapter", 2, False), ("skip", 2, True)])
def test_inspect_and_run_take_the_reading_options(tmp_path: Path, settings_factory, notes: str,  # type: ignore[no-untyped-def]
                                                  chapters_read: int, warned: bool) -> None:
    """`--notes` reaches the reader the same way for `inspect` and for the job `run` records."""
    import json

    from tests.books import endnotes_epub

    env = env_for(settings_factory())
    book = endnotes_epub(tmp_path / "notes.epub")

    inspected = cli(["inspect", str(book), "--json", "--sentences", "--notes", notes], env)

    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    assert len(report["chapters"]) == chapters_read
    assert any("--notes" in w for w in report["warnings"]) == warned
    spoken = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "wav", "--notes", notes], env)
    assert spoken.returncode == 0, spoken.stderr
    [job] = status_json(env)
    assert job["warnings"] == report["warnings"]  # the same count everywhere
    assert job["sentences_total"] == sum(c["sentences"] for c in report["chapters"])


def test_an_unknown_reading_option_is_refused_before_anything_runs(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "A Small Book", CHAPTERS)
    for command in (["run", str(book)], ["submit", str(book)], ["inspect", str(book)]):
        result = cli([*command, "--notes", "margin"], env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == "error: unknown --notes margin: use end, chapter, skip"
    assert status_json(env) == []

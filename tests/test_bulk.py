"""`tts-jobs bulk` as cron runs it: an inbox of books in; jobs, audiobooks and reports out.

What a user notices: each book is submitted once, even renamed, even when two runs overlap;
the output says what was skipped and why; a bad file costs one line, not the night; `--wait`
ends with a summary, one folder per book with its audiobook and report, and an exit code for cron.
Overlapping runs and the whole night with a real worker, on PostgreSQL: tests/test_bulk_postgres.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from jobs.runtime import open_runtime
from storage import repo
from tests.books import write_epub, write_markdown
from tests.conftest import env_for
from tests.e2e_helpers import cli, status_json

ROOT = Path(__file__).resolve().parent.parent
# The ops commands through the real console entry point (registered here until jobs/cli/main.py does it).
OPS_CLI = [sys.executable, "-m", "jobs.cli"]
AN_HOUR_AGO = time.time() - 3600


def run_bulk(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(OPS_CLI + ["bulk", *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def popen_bulk(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(OPS_CLI + ["bulk", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def settled(*paths: Path) -> None:
    """Make files look copied an hour ago, i.e. old enough for a run with the default --min-age."""
    for path in paths:
        os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))


def lines_about(stdout: str, name: str) -> list[str]:
    return [line for line in stdout.splitlines() if f" {name}" in line]


def queued_messages(redis_url: str, queue: str = "cpu") -> int:
    import redis

    return int(redis.Redis.from_url(redis_url).llen(queue))


def small_book(path: Path, title: str) -> Path:
    return write_epub(path, title, [("Only", [f"{title} is a very short book."])])


# ---------------------------------------------------------------- submitting (no worker needed)


def test_each_new_book_is_submitted_once_and_the_output_says_what_was_skipped(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    settings = settings_factory()
    env = env_for(settings)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    alpha = small_book(inbox / "alpha.epub", "Alpha")
    shutil.copyfile(alpha, inbox / "alpha-renamed.epub")  # same content, new name
    write_markdown(inbox / "beta.md", "Beta", [("One", ["Beta has one chapter."])])
    (inbox / "broken.epub").write_bytes(b"this is not a zip archive")
    (inbox / "notes.rtf").write_bytes(b"{\\rtf1 Hello}")  # not a book type: ignored
    small_book(inbox / ".partial.epub", "Hidden")  # a copy tool's temporary: ignored
    settled(*inbox.iterdir())
    os.utime(inbox / "alpha-renamed.epub", (AN_HOUR_AGO + 60, AN_HOUR_AGO + 60))  # the later copy
    small_book(inbox / "fresh.epub", "Fresh")  # still being copied, as far as we can tell

    first = run_bulk([str(inbox), "--out", str(out)], env)

    assert first.returncode == 2, first.stderr  # 2: a file could not be read
    submitted = [line for line in first.stdout.splitlines() if line.startswith("submitted")]
    assert [line.split()[1] for line in submitted] == ["alpha.epub", "beta.md"]
    alpha_job = int(submitted[0].split("-> job ")[1].split()[0])
    [copy_line] = lines_about(first.stdout, "alpha-renamed.epub")
    assert copy_line.startswith("skipped")
    assert f"already submitted as job {alpha_job} (queued), first seen as {alpha}" in copy_line
    [broken] = lines_about(first.stdout, "broken.epub")
    assert broken.startswith("unreadable")
    [fresh] = lines_about(first.stdout, "fresh.epub")
    assert fresh.startswith("skipped") and "still being copied" in fresh
    assert not lines_about(first.stdout, "notes.rtf") and not lines_about(first.stdout, ".partial.epub")
    # one folder per book, OUT/<Author>/<Title> (a Markdown book names no author)
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*")) == ["Test Author/Alpha", "Unknown Author/Beta"]
    assert queued_messages(redis_url) == 2  # the workers were told about both

    settled(inbox / "fresh.epub")
    second = run_bulk([str(inbox), "--out", str(out), "--json"], env)

    assert second.returncode == 2, second.stderr
    books = {Path(b["file"]).name: b for b in json.loads(second.stdout)["books"]}
    assert books["fresh.epub"]["outcome"] == "submitted"
    assert books["broken.epub"]["outcome"] == "unreadable"
    assert {books[name]["outcome"] for name in ("alpha.epub", "alpha-renamed.epub", "beta.md")} == {"skipped"}
    assert len(status_json(env)) == 3 and queued_messages(redis_url) == 3
    # one run's books are one submission (the queue speaks them largest first); the next run's later
    beta_job, fresh_job = int(submitted[1].split("-> job ")[1].split()[0]), books["fresh.epub"]["job"]
    with open_runtime(settings).read_session() as session:
        at = {job_id: repo.get_job(session, job_id).created_at for job_id in (alpha_job, beta_job, fresh_job)}
    assert at[alpha_job] == at[beta_job] < at[fresh_job]


def test_wait_reports_a_book_that_did_not_finish_and_exits_non_zero(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    small_book(inbox / "gamma.epub", "Gamma")
    bulk = popen_bulk([str(inbox), "--out", str(out), "--min-age", "0", "--wait", "--poll", "0.5"], env)
    try:
        job = _wait_for_a_job(env)
        assert cli(["cancel", str(job)], env).returncode == 0  # no worker runs: it can only end this way
        stdout, stderr = bulk.communicate(timeout=120)
    finally:
        if bulk.poll() is None:
            bulk.kill()

    assert bulk.returncode == 1, stderr
    assert f"cancelled   job {job} Gamma" in stdout
    assert "summary: 1 submitted, 0 skipped, 0 unreadable; 0 done, 1 failed" in stdout
    assert "0/1 books finished" in stderr and "1/1 books finished (1 failed)" in stderr  # progress lines
    report = json.loads((out / "Test Author" / "Gamma" / "Gamma.report.json").read_text())
    assert report["state"] == "cancelled" and report["job"] == job and report["error"]


def _wait_for_a_job(env: dict[str, str], timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while not (jobs := status_json(env)):
        assert time.monotonic() < deadline, "the bulk run submitted nothing"
        time.sleep(0.5)
    return int(jobs[0]["id"])


def test_a_run_without_wait_writes_the_reports_of_books_finished_since_the_last_run(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    small_book(inbox / "delta.epub", "Delta")
    assert run_bulk([str(inbox), "--out", str(out), "--min-age", "0"], env).returncode == 0
    [job] = status_json(env)
    assert not (out / "Test Author" / "Delta" / "Delta.report.json").exists()  # not finished yet
    assert cli(["cancel", str(job["id"])], env).returncode == 0

    later = run_bulk([str(inbox), "--out", str(out), "--min-age", "0"], env)

    assert later.returncode == 0, later.stderr
    assert "already submitted as job" in later.stdout
    report = json.loads((out / "Test Author" / "Delta" / "Delta.report.json").read_text())
    assert report["state"] == "cancelled" and report["source"] == "delta.epub"


def test_a_run_while_redis_is_down_stops_and_leaves_the_books_to_the_next_run(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    small_book(inbox / "epsilon.epub", "Epsilon")
    args = [str(inbox), "--out", str(out), "--min-age", "0"]

    down = run_bulk(args, {**env, "TTS_JOBS_BROKER_URL": "redis://127.0.0.1:1/0"})  # nothing listens there

    assert down.returncode == 2
    assert "Traceback" not in down.stderr
    assert "error: cannot reach the broker at redis://127.0.0.1:1/0: connection refused" in down.stderr
    assert "TTS_JOBS_BROKER_URL" in down.stderr
    assert not out.exists() or list(out.rglob("*")) == []
    up = run_bulk(args, env)
    assert up.returncode == 0, up.stderr
    assert f"submitted   epsilon.epub -> job 1 ({out / 'Test Author' / 'Epsilon'})" in up.stdout


def test_a_different_book_with_the_same_title_gets_its_own_folder(
        tmp_path: Path, settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    write_epub(inbox / "first.epub", "Dracula", [("One", ["The first edition."])])
    write_epub(inbox / "second.epub", "Dracula", [("One", ["The second edition, revised."])])

    result = run_bulk([str(inbox), "--out", str(out), "--min-age", "0", "--json"], env)

    assert result.returncode == 0, result.stderr
    folders = sorted(Path(b["book_dir"]) for b in json.loads(result.stdout)["books"])
    assert folders[0] == out / "Test Author" / "Dracula" and folders[1].name.startswith("Dracula (")
    assert folders[1].parent == out / "Test Author"
    assert all(folder.is_dir() for folder in folders)

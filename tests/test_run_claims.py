"""Two runs of one book never both speak it: the claim `run` (and `retry` of a run's job) takes
before it looks is atomic, refuses the second at once (exit 2), and dies with its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.embedded import claim_job_run, plan_run
from jobs.run_claims import RunClaimed, claim_run, claims_dir
from jobs.runtime import Runtime
from jobs.submit import submit_book
from pipeline.errors import InputError
from storage import repo
from storage.models import JobMode, JobState
from tests.books import write_epub

ROOT = Path(__file__).resolve().parent.parent
TAKE_AND_HOLD = """
import sys, time
from pathlib import Path
from jobs.run_claims import RunClaimed, claim_run
start = float(sys.argv[2])
while time.time() < start:  # every process takes the claim at the same instant
    pass
try:
    claim = claim_run(Path(sys.argv[1]), "sha", "choices", "book.epub")
except RunClaimed as refused:
    print("refused", refused, flush=True)
    sys.exit(2)
print("claimed", flush=True)
time.sleep(float(sys.argv[3]))
"""


def _take_and_hold(data_dir: Path, at: float, hold: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", TAKE_AND_HOLD, str(data_dir), str(at), str(hold)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_of_runs_started_at_one_instant_exactly_one_takes_the_book(tmp_path: Path) -> None:
    at = time.time() + 3  # past every process's start-up, even on a loaded machine
    runs = [_take_and_hold(tmp_path, at, hold=5) for _ in range(4)]
    outcomes = [run.communicate(timeout=60) for run in runs]

    claimed = [out for out, _ in outcomes if out.startswith("claimed")]
    refused = [out for out, _ in outcomes if out.startswith("refused")]
    assert len(claimed) == 1 and len(refused) == 3, outcomes
    winner = next(run for run, (out, _) in zip(runs, outcomes) if out.startswith("claimed"))
    assert all(f"(process {os.uname().nodename}:{winner.pid})" in out for out in refused)
    assert sorted(run.returncode for run in runs) == [0, 2, 2, 2]


def test_a_killed_runs_claim_is_free_at_once(tmp_path: Path) -> None:
    holder = _take_and_hold(tmp_path, time.time(), hold=300)
    assert holder.stdout is not None and holder.stdout.readline().startswith("claimed")
    with pytest.raises(RunClaimed):
        claim_run(tmp_path, "sha", "choices", "book.epub")

    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)

    claim_run(tmp_path, "sha", "choices", "book.epub").release()  # no stale lock to wait out or remove
    assert [p.suffix for p in claims_dir(tmp_path).iterdir()] == [".lock"]


def test_a_second_run_of_a_book_is_refused_as_bad_input_until_the_first_lets_go(rt: Runtime, tmp_path: Path) -> None:
    book = write_epub(tmp_path / "book.epub", "Claimed", [("One", ["A sentence to read."])])
    options = JobOptions(out_dir=tmp_path / "out")

    first = plan_run(rt, book, options)
    with pytest.raises(RunClaimed, match="another `tts-jobs run` is reading this book") as refused:
        plan_run(rt, book, replace(options, priority=5))  # the same audiobook: priority aside
    assert isinstance(refused.value, InputError)  # exit 2
    other = plan_run(rt, book, replace(options, speed=3))  # another audiobook of the book: its own claim

    assert first.claim is not None and other.claim is not None
    first.claim.release()
    again = plan_run(rt, book, options)
    assert again.claim is not None and again.resume_job is None
    for plan in (again, other):
        plan.claim.release()  # type: ignore[union-attr]
    with rt.read_session() as session:  # planning alone records nothing
        assert repo.find_jobs_by_sha256(session, _sha(book)) == []


def test_a_retry_of_a_runs_job_takes_the_same_claim(rt: Runtime, tmp_path: Path) -> None:
    book = write_epub(tmp_path / "book.epub", "Retried", [("One", ["A sentence to read."])])
    options = JobOptions(out_dir=tmp_path / "out")
    job = submit_book(rt, book, options, mode=JobMode.EMBEDDED)

    held = claim_job_run(rt, job)
    with pytest.raises(RunClaimed):
        plan_run(rt, book, options)
    held.release()
    plan_run(rt, book, options).claim.release()  # type: ignore[union-attr]


def test_a_live_run_on_another_host_is_refused_by_its_job(rt: Runtime, tmp_path: Path) -> None:
    """Hosts sharing a PostgreSQL database share no lock: the live job's runner and heartbeat say it."""
    book = write_epub(tmp_path / "book.epub", "Elsewhere", [("One", ["A sentence to read."])])
    options = JobOptions(out_dir=tmp_path / "out")
    job = submit_book(rt, book, options, mode=JobMode.EMBEDDED, runner="another-host:4242")  # beating now
    with rt.session() as session:
        assert repo.move_job(session, job, JobState.INGESTING, only_from=[JobState.QUEUED])
        session.commit()

    with pytest.raises(RunClaimed, match=r"job \d+ is reading this book right now \(process another-host:4242\)"):
        plan_run(rt, book, options)
    claim_run(rt.settings.data_dir, _sha(book), options.run_key(), str(book)).release()  # let go on refusal


def _sha(book: Path) -> str:
    from pipeline.files import file_sha256

    return file_sha256(book)

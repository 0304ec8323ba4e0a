"""A long book is planned in two goes by `tts-jobs run`: its first waves before anything is spoken,
the rest in a child process while those are (``jobs.plan.PlanBeside``), so that planning a whole
long book does not hold its first sentence back. The rest comes in the waves it would have had; a
child that fails leaves the rest to the run's own process; the stream waits for the rest instead
of ending with the first waves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import func, select

import jobs.plan
from jobs.choices.options import JobOptions
from jobs.embedded import plan_run, run_book
from jobs.ingest import ingest_job
from jobs.plan import PlanBeside, plan_pending
from jobs.runtime import Runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage import repo
from storage.models import Batch, Sentence
from tests.books import write_epub

# eight chapters of equal length: about a chapter a wave (the policy's eight waves)
CHAPTERS = [(f"Part {n}", [f"Sentence {k} of part {n} is here." for k in range(1, 5)]) for n in range(1, 9)]


@pytest.fixture
def plan_in_two_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A book of more than two sentences counts as long (the policy's threshold is 8,000)."""
    policy = jobs.plan.scheduling_policy
    monkeypatch.setattr(jobs.plan, "scheduling_policy",
                        lambda *args, **kwargs: replace(policy(*args, **kwargs), plan_beside_from=2))


def _read(rt: Runtime, tmp_path: Path, title: str) -> int:
    job_id = submit_book(rt, write_epub(tmp_path / f"{title}.epub", title, CHAPTERS),
                         JobOptions(out_dir=tmp_path / "out"))
    ingest_job(rt, job_id)
    return job_id


def _plans(rt: Runtime, job_id: int) -> tuple[int, list[int]]:
    """Sentences no batch holds yet; sentences per plan (one ``created_at`` each), in plan order."""
    with rt.read_session() as session:
        unplanned = session.scalar(select(func.count(Sentence.id)).where(
            Sentence.job_id == job_id, Sentence.batch_id.is_(None)))
        plans = session.execute(select(Batch.created_at, func.count(Sentence.id)).join(
            Sentence, Sentence.batch_id == Batch.id).where(Sentence.job_id == job_id)
            .group_by(Batch.created_at).order_by(Batch.created_at)).all()
    return unplanned, [count for _, count in plans]


@pytest.mark.usefixtures("plan_in_two_goes")
def test_a_long_books_rest_is_planned_beside_in_the_waves_it_would_have_had(rt: Runtime, tmp_path: Path) -> None:
    whole = _read(rt, tmp_path, "Whole")
    plan_pending(rt, [whole])
    _, waves = _plans(rt, whole)
    assert len(waves) >= 6  # about a chapter a wave
    job_id = _read(rt, tmp_path, "Long Book")
    plan_pending(rt, [job_id], opening=True)
    assert _plans(rt, job_id) == (sum(waves[2:]), waves[:2])  # the first two waves only
    with rt.session() as session:  # the run claims its first batch: the child then writes the rest
        first = repo.next_queued_batch(session, job_id=job_id)
        assert repo.claim_batch(session, first, "run@test", 60.0) is not None
        session.commit()
    rest = PlanBeside(rt, job_id)
    assert rest.wait() is True  # the child planned the rest
    assert _plans(rt, job_id) == (0, waves)  # in the waves a plan in one go makes, after the first two
    assert rest.wait() is False  # nothing more will come


@pytest.mark.usefixtures("plan_in_two_goes")
def test_a_rest_whose_child_fails_is_planned_by_the_run_itself(rt: Runtime, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    job_id = _read(rt, tmp_path, "Failing Child")
    plan_pending(rt, [job_id], opening=True)
    monkeypatch.setenv("TTS_JOBS_WAVES", "many")  # the child's settings cannot be read: it exits 1
    rest = PlanBeside(rt, job_id)
    assert rest.wait() is True
    assert _plans(rt, job_id)[0] == 0 and len(_plans(rt, job_id)[1]) >= 6
    assert "planning it here" in caplog.text


def test_a_short_book_is_planned_whole_and_starts_no_child(rt: Runtime, tmp_path: Path) -> None:
    job_id = _read(rt, tmp_path, "Short Book")  # 40 sentences: under the policy's 8,000
    plan_pending(rt, [job_id], opening=True)
    assert _plans(rt, job_id)[0] == 0 and len(_plans(rt, job_id)[1]) >= 6
    assert PlanBeside(rt, job_id).wait() is False


@pytest.mark.usefixtures("plan_in_two_goes")
def test_a_run_speaks_the_whole_book_planned_in_two_goes(rt: Runtime, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    """The stream finds the queue empty after the first two waves (or before the child is done)
    and waits for the rest instead of ending: every sentence spoken, one audiobook."""
    book = write_epub(tmp_path / "run.epub", "Run In Two Goes", CHAPTERS)
    job_id = run_book(rt, plan_run(rt, book, JobOptions(formats=("wav",), out_dir=tmp_path / "out")), tiny_engine)
    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    assert status.sentences_done == status.sentences_total == 40
    assert len(status.outputs) == 8  # a WAV per chapter
    assert _plans(rt, job_id)[0] == 0 and len(_plans(rt, job_id)[1]) >= 6

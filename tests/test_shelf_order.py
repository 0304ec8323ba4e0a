"""A shelf is spoken largest book first: of the books submitted together (one `tts-jobs submit`,
one bulk run) the queue hands out the larger book's batches first, each book's waves in reading
order, and a later submission waits behind them all, however soon its book is read. A shelf's last
seconds then go to its smallest book, whose last chapters are soon encoded. The real planner and
database (SQLite and PostgreSQL), and the real CLI for the submission."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.submit import submit_book
from pipeline.types import Batch as PlannedBatch
from storage import repo
from storage.models import utcnow
from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli

WORDS = "one two three four five six seven eight nine ten".split()


def book(path: Path, title: str, chapters: int, sentences: int) -> Path:
    """An EPUB of ``chapters`` chapters of ``sentences`` sentences of 3 to 12 words."""
    parts = [(f"Chapter {c + 1}", [" ".join(WORDS[(k + i) % 10] for k in range(3 + (i * 5 + c) % 10)).capitalize()
                                   + "." for i in range(sentences)]) for c in range(chapters)]
    return write_epub(path, title, parts)


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url, max_batch=8), upgrade_schema=False)


def read_and_plan(rt: Runtime, job_id: int) -> None:
    assert ingest_job(rt, job_id)
    plan_pending(rt, [job_id])


def taken_in_turn(rt: Runtime) -> list[int]:
    """Every queued batch, in the order a worker's stream takes them (each claimed as taken)."""
    taken = []
    with rt.session() as session:
        while (batch_id := repo.next_queued_batch(session)) is not None:
            taken.append(batch_id)
            assert repo.claim_batch(session, batch_id, "host:1", 60) is not None
        session.commit()
    return taken


def spoken_order(rt: Runtime) -> list[tuple[int, int]]:
    """(job, first chapter) of every queued batch, in the order a worker's stream takes them."""
    order = []
    for batch_id in taken_in_turn(rt):
        with rt.read_session() as session:
            sentences = repo.batch_pending_sentences(session, batch_id)
        order.append((sentences[0].job_id, min(s.chapter_id for s in sentences)))
    return order


def book_runs(order: list[tuple[int, int]]) -> list[int]:
    """The books in the order their batches come, each once per unbroken run of its batches."""
    return [job for k, (job, _) in enumerate(order) if k == 0 or order[k - 1][0] != job]


def test_books_submitted_together_are_spoken_largest_first_and_a_later_submission_after_them(
        rt: Runtime, tmp_path: Path) -> None:
    options, together = JobOptions(formats=("m4b",)), utcnow()
    small = submit_book(rt, book(tmp_path / "small.epub", "Small", 2, 6), options, submitted_at=together)
    large = submit_book(rt, book(tmp_path / "large.epub", "Large", 4, 12), options, submitted_at=together)
    middle = submit_book(rt, book(tmp_path / "middle.epub", "Middle", 3, 8), options, submitted_at=together)
    later = submit_book(rt, book(tmp_path / "later.epub", "Later", 4, 20), options)
    # read as a CPU worker might: the small and the later book first, the largest last
    for job_id in (small, later, middle, large):
        read_and_plan(rt, job_id)

    order = spoken_order(rt)

    runs = book_runs(order)
    assert runs == [large, middle, small, later]  # each book whole, the largest of the shelf first
    for job_id in runs:  # each book's waves in reading order (a wave's batches longest first)
        chapters = [chapter for job, chapter in order if job == job_id]
        assert chapters == sorted(chapters) and len(set(chapters)) > 1


def test_priority_comes_before_the_submission_and_an_unplaced_batch_keeps_its_plans_time(
        rt: Runtime) -> None:
    """A higher priority still goes first; a batch planned before books had places (an upgraded
    database's) stands where its plan's time puts it among the submissions."""
    early = utcnow() - timedelta(minutes=5)

    def plan(minute: int, place: repo.BookPlace | None, priority: int = 0) -> int:
        [batch] = repo.create_batches(session, [PlannedBatch((), 0, longest_positions=10, priority=priority)],
                                      planned_at=early + timedelta(minutes=minute), place=place)
        return batch.id

    with rt.session() as session:
        unplaced = plan(1, None)
        later_large = plan(3, repo.BookPlace(early + timedelta(minutes=2), 90_000))
        first_small = plan(3, repo.BookPlace(early, 100))
        first_large = plan(4, repo.BookPlace(early, 5_000))
        urgent = plan(4, repo.BookPlace(early + timedelta(minutes=2), 10), priority=1)
        session.commit()
    assert taken_in_turn(rt) == [urgent, first_large, first_small, unplaced, later_large]


def test_the_books_of_one_submit_are_one_submission(tmp_path: Path, settings_factory,  # type: ignore[no-untyped-def]
                                                    redis_url: str) -> None:
    settings = settings_factory()
    env = env_for(settings)
    first = cli(["submit", str(book(tmp_path / "a.epub", "A", 1, 3)), str(book(tmp_path / "b.epub", "B", 2, 3))], env)
    second = cli(["submit", str(book(tmp_path / "c.epub", "C", 1, 3))], env)

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = map(int, first.stdout.split())
    [c] = map(int, second.stdout.split())
    with open_runtime(settings).read_session() as session:
        submitted = {job_id: repo.get_job(session, job_id).created_at for job_id in (a, b, c)}
    assert submitted[a] == submitted[b] < submitted[c]


def test_a_book_planned_again_waits_behind_the_books_submitted_before_its_new_plan(
        rt: Runtime, tmp_path: Path) -> None:
    """A retry re-plans what is left of a book submitted long ago: that rest stands where its
    new plan's time puts it, behind what was submitted meanwhile (a retry cannot jump ahead)."""
    options = JobOptions(formats=("m4b",))
    old = submit_book(rt, book(tmp_path / "old.epub", "Old", 2, 6), options)
    newer = submit_book(rt, book(tmp_path / "newer.epub", "Newer", 2, 6), options)
    assert ingest_job(rt, old) and ingest_job(rt, newer)
    with rt.session() as session:  # the old book's first sentence was planned (and spoken) before
        first = repo.unplanned_sentences(session, [old])[0]
        [spoken] = repo.create_batches(session, [PlannedBatch((first.id,), 0, longest_positions=10)],
                                       place=repo.book_places(session, [old], utcnow())[old])
        repo.finish_batch(session, spoken.id)
        session.commit()
    plan_pending(rt, [newer])
    plan_pending(rt, [old])  # the rest of the old book, as a retry plans it

    assert book_runs(spoken_order(rt)) == [newer, old]

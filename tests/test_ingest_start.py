"""From a submitted book to its first batch: the ingest task plans in place, on SQLite and PostgreSQL.

The Celery tasks run in this process with the real database; what they would send to the broker is
recorded at the send boundary (jobs/cluster/messages.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from jobs import plan
from jobs.choices.options import JobOptions
from jobs.cluster import messages, tasks, worker_process
from jobs.ingest import ingest_job
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage.models import Batch, Chapter, JobState, Sentence
from tests.books import write_epub, write_markdown
from tests.conftest import env_for

CHAPTERS = [("One", ["The first sentence.", "The second sentence, a little longer than the first."]),
            ("Two", ["第二章的句子。", "And a last one."])]
PLAN_TASK = tasks.plan_pending._get_current_object()  # the app's task objects, not per-thread lookups
INGEST_TASK = tasks.ingest_job._get_current_object()


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url, max_batch=3), upgrade_schema=False)


class Broker:
    """What the tasks send, in order: batch messages (ids) and plan_pending messages (their words)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> None:
        self.sent: list[int | str] = []
        self._lock = threading.Lock()
        monkeypatch.setattr(worker_process, "_runtime", rt)
        monkeypatch.setattr(messages, "_send", self._send)

    def _send(self, task: str, args: tuple[int, ...], argsrepr: str, continuation: bool) -> None:
        with self._lock:
            self.sent.append(args[0] if task == messages.SYNTHESIZE else f"plan {argsrepr}")

    @property
    def batches(self) -> list[int]:
        return [m for m in self.sent if isinstance(m, int)]

    @property
    def plan_messages(self) -> list[str]:
        return [m for m in self.sent if isinstance(m, str)]


@pytest.fixture()
def broker(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> Broker:
    return Broker(monkeypatch, rt)


def _submitted(rt: Runtime, tmp_path: Path, name: str, chapters=CHAPTERS) -> int:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / f"{name}.epub", name.title(), chapters)
    return submit_book(rt, book, JobOptions(formats=("wav",)))


def _batch_rows(rt: Runtime) -> dict[int, int]:
    with rt.session() as s:
        return dict(s.execute(select(Batch.id, Batch.size)).all())


def _sentences_per_batch(rt: Runtime) -> dict[int | None, int]:
    with rt.session() as s:
        return dict(s.execute(select(Sentence.batch_id, func.count()).group_by(Sentence.batch_id)).all())


def test_a_submitted_book_gets_its_batches_from_the_ingest_task_before_the_plan_message(
        rt, broker: Broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The plan message is still sent (Flower shows it as before), after the batches: it finds
    nothing left to plan."""
    job_id = _submitted(rt, tmp_path, "book")

    tasks.ingest_job(job_id)

    batches = _batch_rows(rt)
    assert len(batches) == 2  # 4 sentences, at most 3 a batch
    assert broker.sent == sorted(batches) + [f"plan after job {job_id}"]
    assert _sentences_per_batch(rt) == batches  # every sentence in a batch, each batch as large as it says
    assert job_statuses(rt, job_id)[0].state == JobState.SYNTHESIZING.value

    tasks.plan_pending()  # the plan message, delivered
    tasks.ingest_job(job_id)  # a redelivered ingest message: nothing read or planned twice
    assert broker.batches == sorted(batches) and _batch_rows(rt) == batches


def test_the_plan_is_the_one_the_plan_task_makes(settings_factory, database_url: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Same batches, same sentences in each, same order as a plan_pending message would give."""
    chapters = [(f"Chapter {c}", [f"Sentence {c}.{i} " + "word " * ((c * 7 + i * 3) % 11) for i in range(9)])
                for c in range(4)]
    plans = []
    for via_task in (True, False):
        data = tmp_path / ("in-task" if via_task else "message")
        url = database_url if via_task else f"sqlite:///{data / 'jobs.db'}"
        rt = open_runtime(settings_factory(url, max_batch=4, data_dir=data), upgrade_schema=not via_task)
        broker = Broker(monkeypatch, rt)
        job_id = _submitted(rt, tmp_path, "book", chapters)
        if via_task:
            tasks.ingest_job(job_id)
        else:
            assert ingest_job(rt, job_id)
            tasks.plan_pending()
        with rt.session() as s:  # each batch sent: its place in the plan, its row, its sentences
            first = min(broker.batches)
            plans.append([(b - first, s.execute(select(Batch.size, Batch.priority, Batch.longest_positions)
                                                .where(Batch.id == b)).one()._tuple(),
                           s.execute(select(Chapter.index, Sentence.index).join(Chapter)
                                     .where(Sentence.batch_id == b).order_by(Sentence.id)).all())
                          for b in broker.batches])
        rt.sessions.kw["bind"].dispose()
    # 4 chapters of a title and 9 sentences, each its own wave (jobs/plan.py): batches of 4, 4 and 2
    assert plans[0] == plans[1] and len(plans[0]) == 12


def test_a_database_blip_while_planning_leaves_it_to_a_plan_message(rt, broker: Broker, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = _submitted(rt, tmp_path, "book")
    real_plan = plan.plan_pending

    def blip(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(plan, "plan_pending", blip)
    tasks.ingest_job(job_id)

    assert broker.sent == [f"plan after job {job_id}"]
    assert job_statuses(rt, job_id)[0].state == JobState.SYNTHESIZING.value  # read, not failed
    monkeypatch.setattr(plan, "plan_pending", real_plan)
    tasks.plan_pending()  # the message, delivered
    assert sorted(broker.batches) == sorted(_batch_rows(rt)) and None not in _sentences_per_batch(rt)


def test_two_ingests_ending_at_once_never_plan_a_sentence_twice(rt, broker: Broker, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tasks plan at the same moment (a barrier between ingest and plan): each sentence lands
    in exactly one batch and each batch is sent once, whichever planner takes which sentences."""
    chapters = [(f"Chapter {c}", [f"Sentence number {i} of chapter {c}." for i in range(10)]) for c in range(3)]
    jobs = [_submitted(rt, tmp_path, name, chapters) for name in ("first", "second")]
    both_read = threading.Barrier(2, timeout=60)
    real_plan = plan.plan_pending

    def plan_together(*args, **kwargs):  # type: ignore[no-untyped-def]
        both_read.wait()
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(plan, "plan_pending", plan_together)
    errors: list[BaseException] = []

    def ingest(job_id: int) -> None:
        try:
            INGEST_TASK(job_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(job_id,)) for job_id in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and sorted(broker.plan_messages) == sorted(f"plan after job {j}" for j in jobs)
    monkeypatch.setattr(plan, "plan_pending", real_plan)
    tasks.plan_pending()  # the two plan messages, delivered: nothing left to plan
    tasks.plan_pending()
    batches = _batch_rows(rt)
    assert sorted(broker.batches) == sorted(batches)  # each batch sent once
    assert _sentences_per_batch(rt) == batches  # none unplanned, none in two batches
    assert sum(batches.values()) == sum(job_statuses(rt, j)[0].sentences_total for j in jobs) == 66


def test_a_cpu_worker_loads_the_book_readers_and_connects_before_its_first_book(
        settings_factory, database_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What the CPU worker's start-up hook does ahead of the first ingest (a fresh process, as a
    worker child is), and that a database that is down does not keep the worker from starting."""
    probe = ("import json, sys\n"
             "from jobs.cluster import worker_process as tasks\n"
             "wanted = ('pipeline.ingest', 'pipeline.text')\n"
             "before = [m in sys.modules for m in wanted]\n"
             "tasks.prepare_ingest()\n"
             "print(json.dumps({'before': before, 'after': [m in sys.modules for m in wanted],\n"
             "                  'pooled': tasks.runtime().sessions.kw['bind'].pool.checkedin()}))\n")
    env = env_for(settings_factory(database_url))
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"before": [False] * 2, "after": [True] * 2, "pooled": 1}

    env["TTS_JOBS_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:9/none"  # nothing listens there
    down = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert down.returncode == 0, down.stderr
    assert "could not prepare for reading books" in down.stderr
    assert json.loads(down.stdout.splitlines()[-1])["after"] == [True] * 2


def test_a_markdown_book_is_read_and_planned_by_one_task(rt, broker: Broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    book = write_markdown(tmp_path / "book.md", "Notes", [("First", ["One sentence.", "Two sentences."]),
                                                         ("Second", ["Three.", "Four.", "Five."])])
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    tasks.ingest_job(job_id)
    assert broker.plan_messages == [f"plan after job {job_id}"] and len(broker.batches) >= 2
    assert job_statuses(rt, job_id)[0].sentences_total == sum(_batch_rows(rt).values())


def test_a_plan_message_with_nothing_to_plan_does_not_wait_for_the_write_lock(settings_factory, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite: while another book's sentences are being written, the plan message that follows an
    ingest (its book planned already) returns at once instead of queueing for the lock."""
    import sqlite3
    import time

    rt = open_runtime(settings_factory(max_batch=3))  # the embedded SQLite default
    broker = Broker(monkeypatch, rt)
    job_id = _submitted(rt, tmp_path, "book")
    tasks.ingest_job(job_id)
    writer = sqlite3.connect(rt.settings.database_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process's ingest holds the write lock
        started = time.monotonic()
        tasks.plan_pending()
        assert time.monotonic() - started < 5  # the busy timeout is 30 s
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert len(broker.batches) == 2 and broker.plan_messages == [f"plan after job {job_id}"]

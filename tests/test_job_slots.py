"""An embedded run's decode slots (jobs/batches/slots.py): sized for the job's widest batch at its
longest sentence, not for a whole GPU batch of its sentences. A book is planned in waves of
chapters so that its first chapters are done (and assembled) while the rest is spoken; slots for
1,024 rows drew several waves into the steps at once on an H200 (a 6-hour book's waves are ~650
sentences): speaking ended 2.9 s sooner, but every wave finished in its last seconds, 8 chapters
of 30 were assembled ahead instead of 19, and the run took 34.5 s instead of 32.5 s
(docs/benchmarks.md). The real planner and database; the engine is a stand-in with a GPU's
memory answers (no GPU here), recording the slots it is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.batches.slots import prepare_slots_for_job
from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.submit import submit_book
from storage import repo
from tests.books import write_epub

CHAPTERS = [(f"Chapter {c}", [f"Line {i} of chapter {c} is read." for i in range(6)]) for c in "ABC"]


class GpuShapedEngine:
    """What prepare_slots_for_job asks of an engine, answered as an uncapped GPU would."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes, self.slots, self.prepared = budget_bytes, None, []

    def memory_budget_bytes(self) -> int:
        return self.budget_bytes

    def memory_capped(self) -> bool:
        return False

    def kv_bytes_per_position(self) -> int:
        return 34_000  # an H200's int8 cache, all layers

    def prepare_slots(self, rows: int, prompt_tokens: int, steps: int, every_row_count: bool = True) -> int:
        self.prepared.append((rows, prompt_tokens, steps))
        self.every_row_count = every_row_count
        return 11


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url, max_batch=12), upgrade_schema=False)


def _planned_in_waves(rt: Runtime, tmp_path: Path) -> int:
    job_id = submit_book(
        rt, write_epub(tmp_path / "book.epub", "Waves", CHAPTERS), JobOptions(formats=("m4b",)))
    assert ingest_job(rt, job_id)
    plan_pending(rt)
    return job_id


def test_slots_hold_the_widest_wave_not_a_gpu_batch_of_the_jobs_sentences(rt: Runtime, tmp_path: Path) -> None:
    job_id = _planned_in_waves(rt, tmp_path)
    with rt.read_session() as session:
        widest, positions = repo.queued_batch_shape(session, job_id)
        queued = sum(len(repo.batch_pending_sentences(session, b)) for b in repo.queued_batches(session))
    assert widest < 12 < queued  # a wave's batch is one chapter (title and lines): under a GPU batch

    engine = GpuShapedEngine(budget_bytes=80 * 2**30)
    prepare_slots_for_job(rt, engine, job_id)  # type: ignore[arg-type]

    [(rows, prompt, steps)] = engine.prepared
    assert rows == engine.slots == widest  # one wave's rows in flight, not the policy's GPU batch of 12
    assert not engine.every_row_count  # the first sentence waits only for the full slots' graph
    with rt.read_session() as session:
        assert steps == repo.longest_pending_sentence(session, job_id) and prompt + steps == positions


def test_no_slots_are_prepared_where_they_would_crowd_the_device(rt: Runtime, tmp_path: Path) -> None:
    job_id = _planned_in_waves(rt, tmp_path)
    engine = GpuShapedEngine(budget_bytes=1 * 2**20)

    prepare_slots_for_job(rt, engine, job_id)  # type: ignore[arg-type]

    assert engine.prepared == [] and engine.slots is None  # a stream's slots are then its first batch's


def test_where_the_widest_batch_at_the_longest_sentence_would_crowd_the_device_the_rows_that_fit_are_prepared(
        rt: Runtime, tmp_path: Path) -> None:
    """A book of long sentences on an 80-GB card: 1,024 rows at ~2,000 positions do not fit 60 % of
    it, 640 do. Its stream keeps those in flight, not its first batch's (the longest sentences'
    batch, the fewest rows); under half of the rows, nothing (the first batch's shape then)."""
    from pipeline.engine.step_graphs import GROWN_SLOTS_SHARE, rounded_positions

    job_id = _planned_in_waves(rt, tmp_path)
    with rt.read_session() as session:
        widest, positions = repo.queued_batch_shape(session, job_id)
    per_row = rounded_positions(positions) * GpuShapedEngine(0).kv_bytes_per_position()
    engine = GpuShapedEngine(budget_bytes=int((widest - 1) * per_row / GROWN_SLOTS_SHARE) + 1)

    prepare_slots_for_job(rt, engine, job_id)  # type: ignore[arg-type]

    [(rows, _, _)] = engine.prepared
    assert rows == engine.slots and widest / 2 <= rows < widest  # most of the rows, not none
    assert rows * per_row <= GROWN_SLOTS_SHARE * engine.budget_bytes

    too_small = GpuShapedEngine(budget_bytes=int((widest // 2 - 1) * per_row / GROWN_SLOTS_SHARE))
    prepare_slots_for_job(rt, too_small, job_id)  # type: ignore[arg-type]
    assert too_small.prepared == [] and too_small.slots is None

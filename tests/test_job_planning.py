"""Planning a job's sentences into batches, with a real database: ingest and plan idempotent,
each sentence's seed, batches cut to the smallest live GPU worker and its learned limit, the end
pieces for several workers, and the settings that size a batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job, sentence_seed
from jobs.plan import plan_limits, plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage import repo
from storage.models import Batch
from tests.books import write_epub
from tests.test_job_stages import _ingested_job


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url), upgrade_schema=False)


def test_ingest_and_plan_are_idempotent(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job_id = _ingested_job(rt, tmp_path)
    total = job_statuses(rt, job_id)[0].sentences_total
    assert ingest_job(rt, job_id)  # a redelivered ingest message
    assert plan_pending(rt) and plan_pending(rt) == []
    assert job_statuses(rt, job_id)[0].sentences_total == total


def test_sentences_keep_their_seed_whatever_their_batch_or_job(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A retried, resumed or re-batched sentence sounds the same, and so does the same book in
    another job: its seed comes from the book's content and the sentence's place only."""
    def seeds_of(job_id: int) -> list[tuple[int, int, int]]:
        with rt.session() as s:
            return [(c.index, x.index, x.seed) for c in repo.job_chapters(s, job_id)
                    for x in repo.chapter_sentences(s, c.id)]

    first, again = _ingested_job(rt, tmp_path), _ingested_job(rt, tmp_path)
    other = _ingested_job(rt, tmp_path, [("Other", ["A different book entirely."])], name="other")
    with rt.session() as s:
        sha256 = repo.get_job(s, first).source_sha256
    seeds = seeds_of(first)
    assert all(seed == sentence_seed(sha256, c, i) for c, i, seed in seeds)
    assert len({seed for *_, seed in seeds}) == len(seeds)
    assert seeds_of(again) == seeds
    assert seeds_of(other)[0][2] != seeds[0][2]


def test_batches_fit_the_smallest_live_worker_and_its_learned_limit(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The planner cuts to the tightest GPU worker's cap and to the size that ran out of memory."""
    chapters = [("One", [f"Sentence number {i} of the only chapter." for i in range(30)])]
    _ingested_job(rt, tmp_path, chapters)
    fit = {"fixed_bytes": 1_000, "bytes_per_row_position": 10}
    with rt.session() as s:
        repo.register_worker(s, "gpu0@big", device="cuda:0", precision="fp16", memory_cap_bytes=10**12, **fit)
        # 12 rows of up to 400 positions (prompt + new tokens) fit under this worker's cap
        repo.register_worker(s, "gpu0@small", device="cuda:0", precision="fp16",
                             memory_cap_bytes=1_000 + 10 * 12 * 400, **fit)
        repo.lower_worker_max_rows(s, "gpu0@big", 8)
        s.commit()

    batch_ids = plan_pending(rt)

    with rt.session() as s:
        sizes = [s.get(Batch, b).size for b in batch_ids]
    assert sum(sizes) == 31 and max(sizes) == 8  # the learned OOM limit wins over the larger cap


def test_with_two_workers_each_books_last_batches_are_halved(settings_factory, database_url: str,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    """Books submitted together are spoken largest first, not in the order they are read, so any
    book's last wave may end the queue: each book's shortest batches are halved for the two
    workers, the one planned while the other is still being read too; the rest stay whole."""
    rt = open_runtime(settings_factory(database_url, max_batch=256), upgrade_schema=False)
    chapters = [("One", [f"Sentence number {i} of the only chapter." for i in range(600)])]
    fit = {"fixed_bytes": 1_000, "bytes_per_row_position": 10}
    with rt.session() as s:
        for name in ("gpu0@host", "gpu1@host"):
            repo.register_worker(s, name, device="cuda:0", precision="fp16", memory_cap_bytes=10**12, **fit)
        s.commit()
    _ingested_job(rt, tmp_path, chapters, name="first")
    later = submit_book(rt, write_epub(tmp_path / "second.epub", "Second", chapters),
                                JobOptions(formats=("wav",)))

    def sizes(batch_ids: list[int]) -> list[int]:
        with rt.session() as s:
            return [s.get(Batch, b).size for b in batch_ids]

    assert sizes(plan_pending(rt)) == [256, 128, 128, 89]  # the second book is not read yet
    assert ingest_job(rt, later)
    assert sizes(plan_pending(rt)) == [256, 128, 128, 89]


def test_gpu_batches_are_big_pools_and_slots_come_from_the_environment(settings_factory) -> None:  # type: ignore[no-untyped-def]
    from jobs.settings import Settings

    gpu = settings_factory(device="cuda")
    limits, _ = plan_limits(gpu)
    assert limits.max_rows == 1024  # a pool that keeps the decode slots full
    assert plan_limits(settings_factory(device="cpu"))[0].max_rows == 16
    assert plan_limits(gpu.with_overrides(max_batch=300))[0].max_rows == 300
    env = {"TTS_JOBS_DATA_DIR": "/tmp/x", "TTS_JOBS_SLOTS": "256"}
    assert Settings.from_env(env).slots == 256
    assert Settings.from_env({"TTS_JOBS_DATA_DIR": "/tmp/x"}).slots is None


@pytest.mark.parametrize("value", ["0", "-2", "four", "inf", "nan"])
def test_a_memory_cap_that_is_no_size_is_refused_by_name(value: str) -> None:
    from jobs.settings import Settings
    from pipeline.errors import InputError

    assert Settings.from_env({"TTS_JOBS_DATA_DIR": "/tmp/x", "TTS_JOBS_MEMORY_GIB": "7.5"}).memory_gib == 7.5
    assert Settings.from_env({"TTS_JOBS_DATA_DIR": "/tmp/x"}).memory_gib is None
    with pytest.raises(InputError, match=f"TTS_JOBS_MEMORY_GIB={value}: not a memory size"):
        Settings.from_env({"TTS_JOBS_DATA_DIR": "/tmp/x", "TTS_JOBS_MEMORY_GIB": value})

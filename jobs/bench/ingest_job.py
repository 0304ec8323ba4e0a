"""The child process of ``python -m pipeline.bench ingest --jobs``: the reader's own time, then the
job path a CPU worker runs before any GPU work can start (submit, ingest, plan), on a fresh SQLite
database; then a run's plan of the book in two goes. Prints one JSON object.

    python -m jobs.bench.ingest_job BOOK.epub --max-batch 1024
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.settings import Settings
from jobs.submit import submit_book
from pipeline.bench.ingest import measure


def measure_job_path(path: Path, max_batch: int) -> dict[str, float]:
    """Time submit, ingest (recording every sentence) and planning on a fresh SQLite database."""
    with tempfile.TemporaryDirectory() as scratch:
        rt = fresh_runtime(scratch, max_batch)
        started = time.perf_counter()
        job_id = submit_book(rt, path, JobOptions())
        submitted = time.perf_counter()
        ingest_job(rt, job_id)
        ingested = time.perf_counter()
        batches = plan_pending(rt, [job_id])
        planned = time.perf_counter()
    return {"submit_s": submitted - started, "ingest_s": ingested - submitted,
            "plan_s": planned - ingested, "batches": len(batches), **opening_plan(path, max_batch)}


def opening_plan(path: Path, max_batch: int) -> dict[str, float]:
    """A run's plan of the same book on a fresh database: its first waves (what its first sentence
    waits for) and the rest (planned beside the speaking: ``jobs.plan.PlanBeside``)."""
    with tempfile.TemporaryDirectory() as scratch:
        rt = fresh_runtime(scratch, max_batch)
        job_id = submit_book(rt, path, JobOptions())
        ingest_job(rt, job_id)
        started = time.perf_counter()
        plan_pending(rt, [job_id], opening=True)
        opened = time.perf_counter()
        plan_pending(rt, [job_id])
    return {"opening_plan_s": opened - started, "rest_plan_s": time.perf_counter() - opened}


def fresh_runtime(scratch: str, max_batch: int) -> Runtime:
    """A runtime on a new SQLite database in ``scratch``, planning batches of ``max_batch``."""
    return open_runtime(Settings.from_env({"TTS_JOBS_DATA_DIR": scratch, "TTS_JOBS_MAX_BATCH": str(max_batch),
                                           "TTS_JOBS_DATABASE_URL": f"sqlite:///{scratch}/jobs.sqlite"}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.bench.ingest_job", description=__doc__)
    parser.add_argument("book", type=Path)
    parser.add_argument("--max-batch", type=int, default=1024)
    args = parser.parse_args(argv)
    result = measure(args.book)
    result.update(measure_job_path(args.book, args.max_batch))
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

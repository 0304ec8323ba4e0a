"""Ingestion speed benchmark: a generated long novel as EPUB, through read_book + split_sentences.

    python -m pipeline.bench ingest             # 5 MB EPUB, prints seconds and peak RSS
    python -m pipeline.bench ingest --size-mb 2 --keep book.epub
    python -m pipeline.bench ingest --jobs --max-batch 1024   # also: ingest + plan as a job would

With ``--jobs`` the book also goes through the job path a CPU worker runs before any GPU work can
start: ``submit_book``, ``ingest_job`` (read, split, record chapters and sentences) and
``plan_pending`` (batches of ``--max-batch`` sentences), on a fresh SQLite database
(``jobs/bench/ingest_job.py``, run as the child process).

The novel is generated with realistic compressibility (Zipf-distributed words; one sentence in twelve
holds a number, date, money, abbreviation, quotation or dash; one Chinese chapter in five, some with
dates), so the archive holds more than twice its size in text. The timing runs in a fresh child
process so that the peak RSS it reports is the reader's own, not the generator's. CPU seconds are
reported beside wall seconds because a shared machine's load inflates the latter.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.bench.novel import generate

logger = logging.getLogger(__name__)


def measure(path: Path) -> dict[str, float]:
    """Time read_book + split_sentences over every chapter, in this process."""
    from pipeline.ingest import read_book
    from pipeline.text import split_sentences

    logging.getLogger("pipeline").setLevel(logging.ERROR)
    started, started_cpu = time.perf_counter(), time.process_time()
    book = read_book(path)
    read_seconds = time.perf_counter() - started
    sentences = sum(len(split_sentences(chapter)) for chapter in book.chapters)
    total_seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - started_cpu
    return {
        "file_mb": path.stat().st_size / 1024 / 1024,
        "text_mb": sum(len(c.text.encode("utf-8")) for c in book.chapters) / 1024 / 1024,
        "chapters": len(book.chapters),
        "sentences": sentences,
        "read_book_s": read_seconds,
        "total_s": total_seconds,
        "cpu_s": cpu_seconds,
        "load_average": os.getloadavg()[0],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench ingest") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=5.0, help="compressed EPUB size to generate")
    parser.add_argument("--keep", type=Path, help="write the generated EPUB here and keep it")
    parser.add_argument("--jobs", action="store_true", help="also time submit, ingest and plan as a job")
    parser.add_argument("--max-batch", type=int, default=1024,
                        help="batch size for --jobs (16 = a CPU worker)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process's job
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.measure:
        json.dump(measure(args.measure), sys.stdout)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "novel.epub"
        generate(path, args.size_mb)
        result = measured_in_a_child(path, args.jobs, args.max_batch)
    if result is None:
        return 1
    report(result, args.max_batch)
    return 0


def measured_in_a_child(path: Path, as_job: bool, max_batch: int) -> dict[str, float] | None:
    """The measurement in a fresh process (its peak RSS is the reader's own); None if it failed."""
    command = ([sys.executable, "-m", "jobs.bench.ingest_job", str(path), "--max-batch", str(max_batch)]
               if as_job else [sys.executable, "-m", "pipeline.bench", "ingest", "--measure", str(path)])
    child = subprocess.run(command, capture_output=True, text=True, check=False)
    if child.returncode != 0:
        logger.error("measurement failed:\n%s", child.stderr)
        return None
    return json.loads(child.stdout)


def report(result: dict[str, float], max_batch: int) -> None:
    logger.info("EPUB %.1f MB (%.1f MB of text, %d chapters, %d sentences)",
                result["file_mb"], result["text_mb"], result["chapters"], result["sentences"])
    logger.info("read_book %.2f s, read_book + split_sentences %.2f s (%.2f s of CPU), peak RSS %.0f MB",
                result["read_book_s"], result["total_s"], result["cpu_s"], result["peak_rss_mb"])
    if "submit_s" in result:
        logger.info("as a job: submit %.2f s, ingest (read, split, record) %.2f s, "
                    "plan into %d batches of <= %d %.2f s",
                    result["submit_s"], result["ingest_s"], result["batches"], max_batch, result["plan_s"])
        logger.info("a run's plan in two goes: its first waves %.2f s (before its first sentence), "
                    "the rest %.2f s (beside the speaking)", result["opening_plan_s"], result["rest_plan_s"])
    logger.info("machine load average during the run: %.1f on %d cores (wall time grows with it)",
                result["load_average"], os.cpu_count() or 1)

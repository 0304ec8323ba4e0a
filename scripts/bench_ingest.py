"""Ingestion speed benchmark: a generated long novel as EPUB, through read_book + split_sentences.

    python scripts/bench_ingest.py             # 5 MB EPUB, prints seconds and peak RSS
    python scripts/bench_ingest.py --size-mb 2 --keep book.epub
    python scripts/bench_ingest.py --jobs --max-batch 1024   # also: ingest + plan as a job would

With ``--jobs`` the book also goes through the job path a CPU worker runs before any GPU work can
start: ``submit_book``, ``ingest_job`` (read, split, record chapters and sentences) and
``plan_pending`` (batches of ``--max-batch`` sentences), on a fresh SQLite database.

The novel is generated with realistic compressibility (Zipf-distributed words; one sentence in twelve
holds a number, date, money, abbreviation, quotation or dash; one Chinese chapter in five, some with
dates), so the archive holds more than twice its size in text. The timing runs in a fresh child
process so that the peak RSS it reports is the reader's own, not the generator's. CPU seconds are
reported beside wall seconds because a shared machine's load inflates the latter.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

logger = logging.getLogger("bench_ingest")

_SYLLABLES = [
    "ba",
    "be",
    "bi",
    "bo",
    "bu",
    "da",
    "de",
    "di",
    "do",
    "du",
    "ka",
    "ke",
    "ki",
    "ko",
    "ku",
    "la",
    "le",
    "li",
    "lo",
    "lu",
    "ma",
    "me",
    "mi",
    "mo",
    "mu",
    "na",
    "ne",
    "ni",
    "no",
    "nu",
    "ra",
    "re",
    "ri",
    "ro",
    "ru",
    "sa",
    "se",
    "si",
    "so",
    "su",
    "ta",
    "te",
    "ti",
    "to",
    "tu",
    "va",
    "ve",
    "vi",
    "vo",
    "vu",
    "an",
    "en",
    "in",
    "on",
    "un",
    "ar",
    "er",
    "ir",
    "or",
    "ur",
    "st",
    "th",
    "sh",
    "ch",
]
_HANZI = [chr(code) for code in range(0x4E00, 0x4E00 + 3500)]
_EXTRAS = [
    "Mr. Smith",
    "Dr. Jones",
    "in 1984",
    "at 10:30",
    "$3.50",
    "45%",
    "3.5 km",
    "e.g. this",
    "the 2nd time",
    "on 2024-03-05",
    "Chapter IV",
    "“Yes,” she said.",
    "— then —",
    "and so on…",
]


_EXTRA_RATE = 0.08  # sentences holding a number, date, abbreviation, quote or dash: more than most fiction


def _vocabulary(rng: random.Random, size: int = 20_000) -> tuple[list[str], list[float]]:
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size)]
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(size)))  # Zipf, like real prose
    return words, weights


def _english_paragraph(rng: random.Random, words: list[str], weights: list[float]) -> str:
    sentences = []
    for _ in range(rng.randint(2, 8)):
        chosen = rng.choices(words, cum_weights=weights, k=rng.randint(5, 25))
        if rng.random() < _EXTRA_RATE:
            chosen.insert(rng.randrange(len(chosen)), rng.choice(_EXTRAS))
        if rng.random() < 0.3:
            chosen.insert(rng.randrange(1, len(chosen)), ",")
        sentence = " ".join(chosen).replace(" ,", ",")
        sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(".....?!"))
    return " ".join(sentences)


def _chinese_paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 6)):
        clauses = ["".join(rng.choices(_HANZI, k=rng.randint(4, 14))) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            clauses.append(f"{rng.randint(1, 2000)}年{rng.randint(1, 12)}月")
        sentences.append("，".join(clauses) + rng.choice("。。。！？"))
    return "".join(sentences)


def generate(path: Path, size_mb: float, seed: int = 7) -> Path:
    """Write an EPUB of about ``size_mb`` megabytes (compressed) of generated novel."""
    from books import write_epub

    rng = random.Random(seed)
    words, weights = _vocabulary(rng)
    chapters: list[tuple[str, list[str]]] = []
    compressed = 0
    while compressed < size_mb * 1024 * 1024:
        number = len(chapters) + 1
        chinese = number % 5 == 0
        paragraphs = [
            _chinese_paragraph(rng) if chinese else _english_paragraph(rng, words, weights)
            for _ in range(rng.randint(40, 120))
        ]
        title = (
            f"第{number}章 风起"
            if chinese
            else f"Chapter {number}: {' '.join(rng.choices(words, cum_weights=weights, k=3)).title()}"
        )
        chapters.append((title, paragraphs))
        compressed += len(zlib.compress("".join(paragraphs).encode("utf-8"), 6)) + 400
    return write_epub(path, "The Generated Novel", chapters, author="A. Benchmark")


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


def measure_job_path(path: Path, max_batch: int) -> dict[str, float]:
    """Time submit, ingest (recording every sentence) and planning on a fresh SQLite database."""
    from jobs.choices.options import JobOptions
    from jobs.ingest import ingest_job
    from jobs.plan import plan_pending
    from jobs.runtime import open_runtime
    from jobs.settings import Settings
    from jobs.submit import submit_book

    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings.from_env({"TTS_JOBS_DATA_DIR": scratch, "TTS_JOBS_MAX_BATCH": str(max_batch),
                                      "TTS_JOBS_DATABASE_URL": f"sqlite:///{scratch}/jobs.sqlite"})
        rt = open_runtime(settings)
        started = time.perf_counter()
        job_id = submit_book(rt, path, JobOptions())
        submitted = time.perf_counter()
        ingest_job(rt, job_id)
        ingested = time.perf_counter()
        batches = plan_pending(rt, [job_id])
        planned = time.perf_counter()
    return {"submit_s": submitted - started, "ingest_s": ingested - submitted,
            "plan_s": planned - ingested, "batches": len(batches)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=5.0, help="compressed EPUB size to generate")
    parser.add_argument("--keep", type=Path, help="write the generated EPUB here and keep it")
    parser.add_argument("--jobs", action="store_true", help="also time submit, ingest and plan as a job")
    parser.add_argument("--max-batch", type=int, default=1024,
                        help="batch size for --jobs (16 = a CPU worker)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process's job
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.measure:
        result = measure(args.measure)
        if args.jobs:
            result.update(measure_job_path(args.measure, args.max_batch))
        json.dump(result, sys.stdout)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "novel.epub"
        generate(path, args.size_mb)
        child = subprocess.run(
            [sys.executable, __file__, "--measure", str(path), *(["--jobs"] if args.jobs else []),
             "--max-batch", str(args.max_batch)], capture_output=True, text=True, check=False
        )
        if child.returncode != 0:
            logger.error("measurement failed:\n%s", child.stderr)
            return 1
        result = json.loads(child.stdout)
    logger.info(
        "EPUB %.1f MB (%.1f MB of text, %d chapters, %d sentences)",
        result["file_mb"],
        result["text_mb"],
        result["chapters"],
        result["sentences"],
    )
    logger.info(
        "read_book %.2f s, read_book + split_sentences %.2f s (%.2f s of CPU), peak RSS %.0f MB",
        result["read_book_s"],
        result["total_s"],
        result["cpu_s"],
        result["peak_rss_mb"],
    )
    if args.jobs:
        logger.info(
            "as a job: submit %.2f s, ingest (read, split, record) %.2f s, "
            "plan into %d batches of <= %d %.2f s",
            result["submit_s"], result["ingest_s"], result["batches"], args.max_batch, result["plan_s"],
        )
    logger.info(
        "machine load average during the run: %.1f on %d cores (wall time grows with it)",
        result["load_average"],
        os.cpu_count() or 1,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

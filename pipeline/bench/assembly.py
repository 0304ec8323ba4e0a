"""Benchmark the assembly stage on synthetic sentence audio.

Generates ``--hours`` of synthetic sentence WAVs (speech-like noise bursts with silence around
them; NOT speech) in a temporary directory, then times ``assemble_audiobook`` to M4B and prints
the speed as a multiple of real time plus the peak memory of this process and of ffmpeg.

    python -m pipeline.bench assembly --hours 1
    python -m pipeline.bench assembly --hours 10 --formats m4b mp3
    python -m pipeline.bench assembly --hours 2 --formats wav --threads 1   # how well threads scale
    python -m pipeline.bench assembly --hours 7 --formats wav --stitch-in processes threads --threads 0 1
    python -m pipeline.bench assembly --hours 2 --formats wav --measures fresh ahead
    python -m pipeline.bench assembly --hours 3 --chapters 1 --m4b-encode pieces chapters   # one long chapter

``--m4b-encode chapters`` encodes every chapter whole, as before long chapters were cut into
pieces (pipeline/audio/aac.py), for a baseline in the same run.

``--measures``: ``fresh`` (default) times assembly measuring every sentence itself; ``ahead``
measures them first, untimed, as a GPU worker does while it synthesizes (pipeline/audio/measure.py).

With several ``--threads`` / ``--stitch-in`` values, the same book is assembled once per combination.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.audio import (
    AssemblyOptions,
    ChapterAudio,
    SentenceAudio,
    ahead,
    assemble_audiobook,
    write_sentence_wav,
)
from pipeline.audio.measure import measure_ahead, measure_path
from pipeline.bench.synthetic_audio import speechlike_sentence
from pipeline.types import BookMetadata

log = logging.getLogger(__name__)


def generate_book(root: Path, hours: float, chapters: int, sentence_seconds: float) -> list[ChapterAudio]:
    """Write synthetic sentence WAVs and describe them as chapters."""
    rng = np.random.default_rng(20261130)
    variants = [speechlike_sentence(rng, sentence_seconds) for _ in range(24)]
    per_chapter = max(1, round(hours * 3600 / (sentence_seconds + 0.5) / chapters))
    book = []
    for chapter in range(chapters):
        sentences = []
        for number in range(per_chapter + 1):
            path = root / f"c{chapter:03d}" / f"s{number:05d}.wav"
            write_sentence_wav(path, variants[(chapter * 7 + number) % len(variants)], durable=False)
            sentences.append(SentenceAudio(path, paragraph_index=-1 if number == 0 else (number - 1) // 6))
        book.append(ChapterAudio(index=chapter, title=f"Chapter {chapter + 1}", sentences=tuple(sentences)))
    return book


def prepare_measures(book: list[ChapterAudio], measures: str) -> None:
    """Forget every sentence's kept measure; with ``ahead`` take them again now (untimed)."""
    paths = [sentence.path for chapter in book for sentence in chapter.sentences]
    for path in paths:
        measure_path(path).unlink(missing_ok=True)
    if measures == "ahead":
        began = time.monotonic()
        measure_ahead(paths)
        log.info("measured %d sentences ahead in %.1f s (one process)", len(paths), time.monotonic() - began)


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def max_rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux reports KiB


def time_assembly(book: list[ChapterAudio], root: Path, options: AssemblyOptions, keep: bool) -> None:
    """Assemble ``book`` into ``root`` and print what it took."""
    rss_before = max_rss_mib(resource.RUSAGE_SELF)
    load_before = os.getloadavg()[0]
    metadata = BookMetadata(title="Benchmark Book", authors=("Synthetic",), date="2026")
    cpu_before = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    report = assemble_audiobook(book, metadata, root / "out", root / "work", options)
    elapsed = time.monotonic() - began
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before
    size = sum(p.stat().st_size for p in report.outputs)
    print(
        f"audio        {report.total_seconds / 3600:.2f} h in {len(report.chapters)} chapters "
        f"({report.sentence_seconds / 3600:.2f} h speech, {report.pause_seconds / 3600:.2f} h pauses)"
    )
    print(f"formats      {' '.join(options.formats)}: {len(report.outputs)} file(s), {size / 2**20:.0f} MiB")
    print(f"assembly     {elapsed:.1f} s = {report.total_seconds / elapsed:.0f}x real time")
    print(
        f"cpu          {cpu:.1f} s (python + ffmpeg + helpers) = {cpu / (report.total_seconds / 3600):.0f} s "
        f"per audio hour on {os.cpu_count()} cores; load average before {load_before:.1f}"
    )
    print(
        f"loudness     measured {report.measured_lufs:.2f} LUFS, gain {report.gain_db:+.2f} dB, "
        f"limiter {'on' if report.limiter else 'off'}"
    )
    print(
        f"peak RSS     python {max_rss_mib(resource.RUSAGE_SELF):.0f} MiB "
        f"(before assembly {rss_before:.0f} MiB), "
        f"largest child {max_rss_mib(resource.RUSAGE_CHILDREN):.0f} MiB"
    )
    if not keep:  # the outputs of one run are not needed for the next
        shutil.rmtree(root, ignore_errors=True)


PIECE_SECONDS = ahead.MIN_PIECE_SECONDS
WHOLE_CHAPTERS = 1e9  # seconds: pieces this long leave every chapter whole


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench assembly") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--chapters", type=int, default=30)
    parser.add_argument("--sentence-seconds", type=float, default=5.0)
    parser.add_argument("--formats", nargs="+", default=["m4b"])
    parser.add_argument("--keep", type=Path, help="write into this directory and keep it")
    parser.add_argument("--threads", type=int, nargs="+", default=[0],
                        help="parallel jobs (default 0: one per core)")
    parser.add_argument("--stitch-in", nargs="+", choices=("processes", "threads"), default=["processes"],
                        help="stitch chapters in helper processes (default) or threads of this one")
    parser.add_argument("--measures", nargs="+", choices=("fresh", "ahead"), default=["fresh"],
                        help="sentences measured by assembly (fresh) or before it, untimed (ahead)")
    parser.add_argument("--m4b-encode", nargs="+", choices=("pieces", "chapters"), default=["pieces"],
                        help="M4B encodes: long chapters cut into pieces (default) or every chapter whole")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_assembly_"))
    try:
        began = time.monotonic()
        book = generate_book(root / "sentences", args.hours, args.chapters, args.sentence_seconds)
        log.info(
            "generated %d sentence WAVs in %.0f s (synthetic noise, not speech)",
            sum(len(c.sentences) for c in book),
            time.monotonic() - began,
        )
        for threads, stitch_in, measures, encode in itertools.product(
                args.threads, args.stitch_in, args.measures, args.m4b_encode):
            options = AssemblyOptions(formats=tuple(args.formats), threads=threads,
                                      stitch_in_processes=stitch_in == "processes")
            prepare_measures(book, measures)
            ahead.MIN_PIECE_SECONDS = WHOLE_CHAPTERS if encode == "chapters" else PIECE_SECONDS
            print(f"--- {threads or 'one per core'} parallel job(s), chapters stitched in {stitch_in}, "
                  f"sentences measured {measures}, M4B encoded in {encode}")
            time_assembly(book, root / f"run_{threads}_{stitch_in}_{measures}_{encode}", options,
                          keep=args.keep is not None)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0

"""The tail after the last sentence: how long a book's audiobook takes to finish once its last
sentence is recorded, for a recording that arrives at a given rate (a multiple of real time).

Generates ``--hours`` of synthetic sentence WAVs (speech-like noise bursts, NOT speech) and
measures every sentence first, untimed, as a GPU worker's measure helpers do while it speaks.
Then, for each ``--rate``, plays the recording back in time: the book's chapters are recorded in
``--waves`` stretches of whole chapters in reading order (as the planner plans a book), each
stretch at once when the clock reaches the time its audio takes at that rate; and the tail is
timed from the last stretch's arrival to the finished files. Modes:

- ``end``: nothing is assembled before the last sentence (the assembly does every chapter);
- ``ahead``: each stretch's chapters are prepared on a thread as they arrive (measured,
  levelled, stitched, encoded; ``pipeline/audio/ahead.py``), on all cores but a few, at lower
  priority, as ``tts-jobs run`` and a cluster's CPU workers do; once the whole book is recorded
  the assembly does what is left on every core (the last stretch), then the mux;
- ``ahead-serial``: as ``ahead``, but the thread also prepares the last stretch (all but its
  last chapter) before the assembly does the last chapter (assemble-ahead's first version).

    python -m pipeline.bench assembly-tail --hours 1 --chapters 24 --rate 100
    python -m pipeline.bench.assembly_tail --hours 2 --chapters 40 --rate 100 400 --formats m4b mp3

The table gives each tail in seconds and as a multiple of real time (book length / tail), and
how many times shorter it is than ``end``'s.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.audio import AssemblyOptions, ChapterAudio, assemble_audiobook
from pipeline.audio.ahead import ENCODE_NICENESS, BookAhead, encode_threads
from pipeline.audio.ahead_thread import AheadThread
from pipeline.audio.stitch_helpers import set_helper_niceness
from pipeline.bench.assembly import generate_book, prepare_measures
from pipeline.scheduling import SchedulingPolicy
from pipeline.types import SAMPLE_RATE, BookMetadata

log = logging.getLogger(__name__)

MODES = ("end", "ahead", "ahead-serial")
METADATA = BookMetadata(title="Tail Benchmark", authors=("Synthetic",), date="2026")


@dataclass(frozen=True)
class Tail:
    mode: str
    rate: float
    seconds: float  # last stretch recorded -> every file written
    book_seconds: float
    prepared: int  # chapters prepared before the assembly began


def stretches(book: Sequence[ChapterAudio], chapter_seconds: Sequence[float], waves: int) -> list[int]:
    """Where each stretch of whole chapters ends (exclusive chapter positions), each about
    ``1 / waves`` of the book, as the planner cuts a book into waves."""
    total, ends, done = sum(chapter_seconds), [], 0.0
    for position, seconds in enumerate(chapter_seconds):
        done += seconds
        if done >= total * (len(ends) + 1) / waves - 1e-9 and position + 1 < len(book):
            ends.append(position + 1)
    return [*ends, len(book)]


def timed_tail(book: list[ChapterAudio], chapter_seconds: Sequence[float], work: Path, options: AssemblyOptions,
               mode: str, rate: float, waves: int) -> Tail:
    """Play the recording back at ``rate`` and time the tail after its last stretch in ``mode``."""
    ends = stretches(book, chapter_seconds, waves)
    arrivals = [sum(chapter_seconds[:end]) / rate for end in ends]
    thread = preparer(book, work / "work", options) if mode != "end" else None
    began = time.monotonic()
    for end, arrival in zip(ends, arrivals, strict=True):
        time.sleep(max(0.0, began + arrival - time.monotonic()))
        if thread is not None and (end < len(book) or mode == "ahead-serial"):
            thread.hand_over(min(end, len(book) - 1))
    last = time.monotonic()
    taken: list = []

    def take() -> list:  # as a job's assembly takes them: once what follows the stretch under way is laid out
        taken.extend(thread.finish() if thread is not None else [])
        return taken

    assemble_audiobook(book, METADATA, work / "out", work / "work", options, prepared=take)
    return Tail(mode, rate, time.monotonic() - last, sum(chapter_seconds), len(taken))


def preparer(book: list[ChapterAudio], work_dir: Path, options: AssemblyOptions) -> AheadThread:
    """The thread ``jobs.assemble_ahead.AssembleAhead`` prepares an embedded run's chapters on,
    with the same encoders and niceness, reading the chapters from ``book``."""
    set_helper_niceness(ENCODE_NICENESS)
    ahead = BookAhead(work_dir, replace(options, threads=encode_threads()), len(book), nice=ENCODE_NICENESS,
                      metadata=METADATA)
    return AheadThread(ahead, lambda first, end: book[first:end], "bench")


def print_table(tails: Sequence[Tail], formats: Sequence[str], cores: int) -> None:
    hours = tails[0].book_seconds / 3600
    print(f"\ntail after the last sentence: {hours:.2f} h book, {', '.join(formats)}, {cores} cores "
          "(synthetic audio, not speech)")
    print(f"{'rate':>7} {'mode':<13} {'tail s':>8} {'x real time':>12} {'prepared':>9} {'vs end':>7}")
    for tail in tails:
        end = next(t for t in tails if t.rate == tail.rate and t.mode == "end") \
            if any(t.rate == tail.rate and t.mode == "end" for t in tails) else None
        ratio = f"{end.seconds / tail.seconds:.1f}x" if end is not None else "-"
        print(f"{tail.rate:>6.0f}x {tail.mode:<13} {tail.seconds:>8.2f} {tail.book_seconds / tail.seconds:>11.0f}x "
              f"{tail.prepared:>9} {ratio:>7}")


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench.assembly_tail") -> int:
    from pipeline.audio.parallel import worker_count

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--chapters", type=int, default=24)
    parser.add_argument("--sentence-seconds", type=float, default=5.0)
    parser.add_argument("--formats", nargs="+", default=["m4b"])
    parser.add_argument("--rate", type=float, nargs="+", default=[100.0],
                        help="how fast the recording arrives, as a multiple of real time")
    parser.add_argument("--waves", type=int, default=SchedulingPolicy().waves_per_book)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    root = Path(tempfile.mkdtemp(prefix="bench_tail_"))
    try:
        book = generate_book(root / "sentences", args.hours, args.chapters, args.sentence_seconds)
        prepare_measures(book, "ahead")
        options = AssemblyOptions(formats=tuple(args.formats))
        seconds = [_chapter_seconds(chapter, options) for chapter in book]
        tails = []
        for rate in args.rate:
            for mode in args.modes:
                tails.append(timed_tail(book, seconds, root / f"{mode}_{rate:g}", options, mode, rate, args.waves))
                shutil.rmtree(root / f"{mode}_{rate:g}", ignore_errors=True)
        print_table(tails, args.formats, worker_count(0))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _chapter_seconds(chapter: ChapterAudio, options: AssemblyOptions) -> float:
    """About how long the chapter plays: its sentences' kept measures, plus their pauses."""
    from pipeline.audio.stitch import measure_chapter

    return measure_chapter(chapter, options, options.chapter_pause_ms).samples / SAMPLE_RATE


if __name__ == "__main__":
    raise SystemExit(main())

"""A model, not a measurement: when a book's chapters are done (every sentence spoken), for the
planner's waves, as a GPU stream's decode slots would speak them.

The book is the run-book benchmark's EPUB (``--hours``, ``--chapters``), read and planned by the
real code (``pipeline.batching``: ``in_waves``, ``plan_batches``). Rows are admitted as the
engine admits them (each batch longest first behind the rows already waiting, once an eighth of
the slots are free), one step a row at a time, a step's time growing with the live rows; a row
ends past its floor at a steady rate that leaves ``--capped`` of rows at their cap (synthetic
weights: ~18 %). Times are scaled so that the book speaks at ``--rate`` times real time in the
first ``--waves`` given (the others in the same scale: their cost in the slots shows). The table
says how much of the book's audio is in chapters finished in the last seconds of the stream:
what an assembly ahead cannot have prepared, and so what is left to encode after the last
sentence.

    python -m pipeline.bench completion-model --hours 24 --chapters 60 --waves 8 16
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.types import GPT_STEPS_PER_SECOND

SLOTS = 1024
LAST_SECONDS = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Row:
    id: int
    chapter_id: int
    budget: int  # its cap: GPT steps
    steps: int  # what it runs in the model

    @property
    def max_new_tokens(self) -> int:  # what the planner's waves are cut by
        return self.budget


def book_rows(hours: float, chapters: int, capped: float, seed: int = 0) -> list[Row]:
    """The benchmark book's sentences as rows, their lengths drawn as the model says."""
    from pipeline.bench.run_book import write_book
    from pipeline.ingest import read_book
    from pipeline.lengths import token_limits
    from pipeline.text import split_sentences

    draw = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        book, _ = write_book(Path(folder) / "book.epub", hours, chapters)
        read = read_book(book)
    rows = []
    for index, chapter in enumerate(read.chapters):
        for sentence in split_sentences(chapter):
            floor, cap = token_limits(sentence.text)
            rows.append(Row(len(rows), index, cap, _steps(draw, floor, cap, capped)))
    return rows


def _steps(draw: random.Random, floor: int, cap: int, capped: float) -> int:
    """Random weights choose EOS about as often at every step past the floor: steps beyond it are
    geometric, at the rate that leaves ``capped`` of rows running to the cap."""
    if cap <= floor:
        return cap
    rate = 1.0 - capped ** (1.0 / (cap - floor))
    return min(cap, floor + int(math.log(1.0 - draw.random()) / math.log(1.0 - rate)))


def planned(rows: Sequence[Row], waves: int) -> list[list[Row]]:
    """The book's batches in the order a stream takes them, by the planner's own code."""
    from pipeline.batching import PlanLimits, in_waves, plan_batches
    from pipeline.scheduling import SchedulingPolicy
    from pipeline.types import PlannedSentence

    by_id = {row.id: row for row in rows}
    policy = SchedulingPolicy()
    batches = []
    for stretch, opens_book in in_waves(rows, waves):
        limits = PlanLimits(memory_cap_bytes=None, max_rows=SLOTS, policy=policy,
                            lead_rows=policy.lead_rows if opens_book else 0)
        sentences = [PlannedSentence(id=row.id, max_new_tokens=row.budget, prompt_tokens=8)
                     for row in stretch]
        batches += [[by_id[i] for i in batch.sentence_ids] for batch in plan_batches(sentences, limits)]
    return batches


def spoken_at(batches: Sequence[Sequence[Row]]) -> dict[int, float]:
    """Each row's end, in model seconds: slots admit a batch's rows longest first once an eighth of
    them are free (or none run), a step takes 0.9 ms + 2.6 us a live row (~3.6 ms at 1,024)."""
    queue, waiting, live, now, ends = list(batches), [], [], 0.0, {}
    while queue or waiting or live:
        while queue and len(waiting) < SLOTS:
            waiting += sorted(queue.pop(0), key=lambda row: -row.budget)
        free = SLOTS - len(live)
        if waiting and (free >= SLOTS // 8 or not live or (not queue and free >= len(waiting))):
            live += [[row.steps, row] for row in waiting[:free]]
            del waiting[:free]
        steps = min(left for left, _ in live)
        now += steps * (0.9e-3 + 2.6e-6 * len(live))
        for entry in live:
            entry[0] -= steps
            if entry[0] == 0:
                ends[entry[1].id] = now
        live = [entry for entry in live if entry[0] > 0]
    return ends


def audio_seconds(rows: Sequence[Row]) -> float:
    return sum(row.steps for row in rows) / GPT_STEPS_PER_SECOND


def late_audio(rows: Sequence[Row], ends: dict[int, float], scale: float) -> tuple[float, list[float]]:
    """The stream's length (model seconds times ``scale``) and the audio hours of chapters done in
    each of the last ``LAST_SECONDS`` of it."""
    audio: dict[int, float] = {}
    done: dict[int, float] = {}
    for row in rows:
        audio[row.chapter_id] = audio.get(row.chapter_id, 0.0) + row.steps / GPT_STEPS_PER_SECOND
        done[row.chapter_id] = max(done.get(row.chapter_id, 0.0), ends[row.id] * scale)
    end = max(done.values())
    return end, [sum(a for c, a in audio.items() if done[c] > end - last) / 3600 for last in LAST_SECONDS]


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench completion-model") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--chapters", type=int, default=60)
    parser.add_argument("--waves", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--capped", type=float, default=0.18, help="share of rows that run to their cap")
    parser.add_argument("--rate", type=float, default=2300.0, help="the stream's speed, times real time")
    args = parser.parse_args(argv)
    rows = book_rows(args.hours, args.chapters, args.capped)
    print(f"{len(rows)} sentences, {audio_seconds(rows) / 3600:.1f} h, in {args.chapters} chapters; "
          f"{args.capped:.0%} run to their cap (a model, not a measurement)")
    print(f"{'waves':>6} {'stream s':>9}  audio (h) in chapters done in the last " +
          " / ".join(f"{s:g}" for s in LAST_SECONDS) + " s")
    scale = None
    for waves in args.waves:
        ends = spoken_at(planned(rows, waves))
        scale = scale or audio_seconds(rows) / args.rate / max(ends.values())
        end, late = late_audio(rows, ends, scale)
        print(f"{waves:>6} {end:>9.1f}  " + " / ".join(f"{hours:.2f}" for hours in late))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A model, not a measurement: the work a batch's decode steps and Decoder+Vocos chunks do beyond
its rows' own, by the engine's own rules, on the engine benchmark's sentences (their forced
lengths, ``pipeline/bench/protocol.py``), so that what a change to those rules should save can be
predicted on any machine before a GPU measures it.

Slots (``--slots``) take the pool longest first, newcomers once an eighth of them are free (or
none run); a step runs at the live-slot bucket of the last occupied slot (``row_buckets``); ended
rows are harvested every 8 steps, one harvest behind, their slots freed; with nothing left to
admit, live rows move to the front once half the slots up to the last would hold them. Per step
it counts:

- attention reads: the cache positions the live rows read, and what slots whose rows had ended
  read on top of that when they still read their caches (now none: ``attended_lengths``); with
  the weights read once a step, the steps' bytes: how long they take at a device's copy ceiling;
- GEMM rows: the step's bucket against its live rows, at powers of two and at the engine's buckets;
- Decoder+Vocos: the finished rows, as harvested, through the real ``WaveformsAlongside`` over a
  stand-in decoder that chunks them as the GPU's graphs would (``chunk_rows``, a bucket's steps, a
  power of two of rows): padded row-steps against the rows' own, every buffered row launched at a
  chunk's worth (before) and whole chunks at ``FLUSH_CHUNKS`` chunks' worth (now).

    python -m pipeline.bench step-model                 # the bench: 1,024 sentences in 1,024 slots
    python -m pipeline.bench step-model --pool 2048     # a pool refilling the slots, as a stream
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch

import pipeline.engine.waveform_overlap as waveform_overlap  # noqa: PLR0402 (its FLUSH_CHUNKS is set)
from pipeline.bench.protocol import forced_steps, make_workload
from pipeline.engine import kv_int8
from pipeline.engine.step_graphs import bucket_for, row_buckets
from pipeline.engine.timing import PhaseClock
from pipeline.engine.waveform import chunk_rows
from pipeline.engine.waveform_graphs import WaveformGraphs
from pipeline.engine.waveform_overlap import WaveformsAlongside

CHUNK_ROW_STEPS = 16384  # WaveformDecoder.row_steps_per_chunk
# ChatTTS's GPT as the steps read it: 20 layers of keys and values, 12 heads of 64, int8 codes and
# an fp16 scale per vector; its linears and heads in fp16 (~190.6 M weights), read once a step
CACHE_BYTES_PER_POSITION = 20 * 2 * 12 * (64 + kv_int8.scale_bytes())
WEIGHT_BYTES_PER_STEP = 2 * 190_600_000
COPY_CEILINGS = (("H100", 3.0e12), ("H200", 4.3e12))  # bytes/s a device-to-device copy reaches
HARVEST_EVERY = 8
PROMPT_EXTRA = 6  # prompt positions besides a sentence's ~one token a character


@dataclass
class StepCounts:
    steps: int = 0
    live_reads: int = 0  # cache positions read by live rows
    ended_reads: int = 0  # ... by slots holding no live row in a power-of-two bucket, had they read
    live_rows: int = 0
    power_rows: int = 0  # bucket rows at powers of two
    engine_rows: int = 0  # bucket rows at row_buckets


def run_slots(lengths: list[int], prompts: list[int], slots: int) -> tuple[StepCounts, list[list[int]]]:
    """Step the pool through the slots; the counts, and the rows' steps as each harvest finds them ended."""
    pending = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    row: list[int | None] = [None] * slots
    context, left = [0] * slots, [0] * slots
    counts, harvests, engine = StepCounts(), [], row_buckets(slots)
    powers = sorted({min(1 << n, slots) for n in range(slots.bit_length() + 1)})

    def admit() -> None:
        free = [s for s in range(slots) if row[s] is None]
        take = min(len(free), len(pending))
        running = any(r is not None for r in row)
        if take and not (take < slots // 8 and len(pending) > take and running):
            for s in free[:take]:
                r = pending.pop(0)
                row[s], context[s], left[s] = r, prompts[r], lengths[r]

    admit()
    while any(r is not None for r in row):
        last = max(s for s, r in enumerate(row) if r is not None) + 1
        # slots in the old (power-of-two) bucket that hold no live row read their caches then:
        # an ended row's, or a freed slot's stale one (its write position was never reset)
        counts.ended_reads += sum(context[s] for s in range(bucket_for(last, powers)) if left[s] == 0)
        for s in range(last):
            if left[s] > 0:
                counts.live_reads += context[s]
                counts.live_rows += 1
                context[s] += 1
                left[s] -= 1
        counts.power_rows += bucket_for(last, powers)
        counts.engine_rows += bucket_for(last, engine)
        counts.steps += 1
        if counts.steps % HARVEST_EVERY == 0:
            ended = [s for s in range(slots) if row[s] is not None and left[s] == 0]
            harvests.append([lengths[row[s]] for s in ended])  # type: ignore[index]
            for s in ended:
                row[s] = None
            admit()
            occupied = [s for s in range(slots) if row[s] is not None]
            if not pending and occupied and 2 * len(occupied) <= occupied[-1] + 1:  # generation's rule
                moved = [(row[s], context[s], left[s]) for s in occupied]
                row[:] = [None] * slots
                for s, (r, c, n) in enumerate(moved):
                    row[s], context[s], left[s] = r, c, n
    return counts, [h for h in harvests if h]


class ChunkCounter:
    """A stand-in Decoder+Vocos for ``WaveformsAlongside``: counts each launch's chunks at the
    shapes the GPU's graphs run them (``whole`` False: every buffered row launched at once)."""

    row_steps_per_chunk = CHUNK_ROW_STEPS
    device = torch.device("cpu")

    def __init__(self, whole: bool) -> None:
        self.whole = whole
        self.graphs = WaveformGraphs(lambda x, frames: x, CHUNK_ROW_STEPS, hop=256)
        self.own = self.padded = self.chunks = 0

    def _chunks(self, lengths: list[int]) -> list[list[int]]:
        return chunk_rows(lengths, CHUNK_ROW_STEPS, self.graphs.padded_steps)

    def whole_chunks(self, lengths: list[int]) -> list[int]:
        chunks = self._chunks(lengths)
        return [i for chunk in (chunks[:-1] if self.whole else chunks) for i in chunk]

    def decode_on_device(self, hiddens: list[torch.Tensor]) -> list[torch.Tensor]:
        lengths = [h.shape[0] for h in hiddens]
        for chunk in self._chunks(lengths):
            steps = self.graphs.padded_steps(max(lengths[i] for i in chunk))
            self.padded += self.graphs.padded_rows(len(chunk), steps) * steps
            self.own += sum(lengths[i] for i in chunk)
            self.chunks += 1
        return [torch.zeros(0) for _ in hiddens]


def chunked(harvests: list[list[int]], whole: bool) -> ChunkCounter:
    """The harvests' rows through ``WaveformsAlongside`` as the generation loop hands them over;
    not ``whole``: as before, every buffered row launched at one chunk's worth."""
    counter, row, flush_chunks = ChunkCounter(whole), 0, waveform_overlap.FLUSH_CHUNKS
    waveform_overlap.FLUSH_CHUNKS = flush_chunks if whole else 1
    try:
        with WaveformsAlongside(counter, None, PhaseClock(counter.device), in_thread=False) as alongside:  # type: ignore[arg-type]
            for harvest in harvests:
                alongside.submit(list(range(row, row + len(harvest))), [torch.empty(n, 1) for n in harvest])
                row += len(harvest)
            alongside.collect()
    finally:
        waveform_overlap.FLUSH_CHUNKS = flush_chunks
    return counter


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench step-model") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=1024, help="sentences (default 1,024: the bench's)")
    parser.add_argument("--slots", type=int, default=1024)
    args = parser.parse_args(argv)
    texts = make_workload(args.pool, 0)
    lengths = [forced_steps(text) for text in texts]
    counts, harvests = run_slots(lengths, [len(text) + PROMPT_EXTRA for text in texts], args.slots)
    before, now = chunked(harvests, whole=False), chunked(harvests, whole=True)
    print(f"{args.pool} sentences ({sum(lengths)} GPT steps) in {args.slots} slots: {counts.steps} steps "
          "(a model, not a measurement)")
    print(f"attention reads of slots whose rows had ended: +{counts.ended_reads / counts.live_reads:.1%} "
          "on the live rows' (now none)")
    needed = counts.live_reads * CACHE_BYTES_PER_POSITION + counts.steps * WEIGHT_BYTES_PER_STEP
    print(f"the steps' bytes (live rows' cache, weights once a step): {needed / 1e9:.0f} GB, at the copy ceiling "
          + ", ".join(f"{name} {needed / rate:.2f} s" for name, rate in COPY_CEILINGS))
    print(f"GEMM rows against the live rows: powers of two {counts.power_rows / counts.live_rows:.3f}x, "
          f"the engine's buckets {counts.engine_rows / counts.live_rows:.3f}x")
    print(f"Decoder+Vocos padded row-steps against the rows' own: all buffered rows at a chunk's worth "
          f"{before.padded / before.own:.3f}x ({before.chunks} chunks), whole chunks at "
          f"{waveform_overlap.FLUSH_CHUNKS} chunks' worth {now.padded / now.own:.3f}x ({now.chunks} chunks)")
    assert before.own == now.own == sum(map(sum, harvests))  # every finished row decoded once, either way
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Decode steps replayed from CUDA graphs, one graph per step kind (live-slot bucket, attention
length bucket, sampling stages).

A decode step is ~450 small kernels; launched one by one from Python it costs ~5 ms on an H200
whatever the batch, several times the GPU's own time for it. Replaying a captured graph launches
them all at once. The first time a kind is needed the step runs eagerly (real work, and the
warm-up capture needs) and is then captured; later steps of that kind replay. Graphs belong to one
``SlotState``: they hold its tensors' addresses, so they are dropped with it.

On CPU, or with ``EngineTuning(cuda_graphs=False)``, or if a capture fails (it is logged once), every step
runs eagerly: the same code, the same results.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import torch

from pipeline.engine.decode_step import StepKind, TokenSpace, decode_step
from pipeline.engine.gpt import FusedLlama
from pipeline.engine.graph_recording import HostTime
from pipeline.engine.memory import device_budget_bytes, device_capped
from pipeline.engine.prefill import PrefillGraphs
from pipeline.engine.sampling import candidate_count
from pipeline.engine.slots import SlotShape, SlotState
from pipeline.engine.streams import HIGHEST, forked, kept_stream
from pipeline.types import SynthesisRequest

log = logging.getLogger(__name__)

# Held while a graph is captured, and by anything else that launches GPU work from another thread
# (Decoder + Vocos, ``waveform_overlap``): work queued by another thread during a capture breaks
# it ("operation not permitted when stream is capturing"), and every later step then runs
# eagerly. Captures are rare (new slot shapes), so the wait is too.
CAPTURE_LOCK = threading.Lock()

ATTEND_BUCKET = 64  # attention lengths are rounded up to this (fewer graphs, little waste)
POSITION_ROUNDING = 128  # slot capacity in cache positions, so that similar batches share slots


CUDA_GRAPHS = True  # False: every step eager (EngineTuning.cuda_graphs, set by loading.apply_tuning)
# EngineTuning.step_priority: steps captured and replayed on the device's highest-priority stream.
# Decoder+Vocos shares the GPU from a side stream (``waveform_overlap``): making it faster took the
# steps beside it from 3.13 to 2.83 ms on an H100. The block scheduler serves a higher-priority
# stream's waiting blocks first, so its kernels would take what the steps leave. Both, because
# PyTorch 2.10+ instantiates a graph with its kernels' own priorities (those of the stream it was
# captured on) and older ones with the launching stream's. A replay allocates nothing: the fork and
# join around it are the only cost. Measured on an H100 (1,024 slots): steps 2.64 against 2.70 ms,
# 2.55 with the word kernel's RoPE inside (word_attention.ROPE_INSIDE) against 2.70 with neither.
URGENT_STEPS = True


def graphs_wanted(device: torch.device) -> bool:
    return device.type == "cuda" and CUDA_GRAPHS


def mid_book_graphs_allowed(device: torch.device) -> bool:
    """Graphs captured mid-book (Decoder+Vocos chunks, admissions' prefills): where decode steps
    use graphs, unless the device is capped (their pools would keep memory the cap has no room for)."""
    return graphs_wanted(device) and not device_capped(device)


# Above this many rows, live-slot buckets every this many rows, not at powers of two: a step's
# GEMMs run at its bucket's rows, ended ones included, and as a batch's rows end through powers
# of two they ran 1.26x the live rows in the bench (1,024 rows; every 128: 1.10x, four more
# graphs of 1,024 slots; ``python -m pipeline.bench step-model``). Its attention reads live rows
# only (decode_attention.attended_lengths).
ROW_BUCKET_STEP = 128


def row_buckets(capacity: int) -> list[int]:
    """Live-slot counts a step may run at: powers of two up to ``ROW_BUCKET_STEP``, then every
    ``ROW_BUCKET_STEP`` rows, and ``capacity``."""
    buckets, size = [], 1
    while size < capacity:
        buckets.append(size)
        size = size * 2 if size < ROW_BUCKET_STEP else size + ROW_BUCKET_STEP
    return buckets + [capacity]


def bucket_for(count: int, buckets: list[int]) -> int:
    return next(b for b in buckets if b >= count)


def attend_bucket(positions_needed: int, capacity: int) -> int:
    rounded = -(-positions_needed // ATTEND_BUCKET) * ATTEND_BUCKET
    return min(rounded, capacity)


# Grown slots' KV cache may take at most this share of the device: on an H200 (int8 cache) 1024
# rows of 2,304 positions (77 GB, 0.54) — the planner's widest batch at the 2048-token cap.
GROWN_SLOTS_SHARE = 0.6


def rounded_positions(positions: int) -> int:
    """Slot positions are allocated in whole blocks of POSITION_ROUNDING."""
    return -(-positions // POSITION_ROUNDING) * POSITION_ROUNDING


def grown_shape(old: SlotShape | None, needed: SlotShape, kv_bytes_per_position: int,
                device_bytes: int | None) -> SlotShape:
    """Slots for ``needed`` after ``old``: the union of both (most rows of either, longest rows
    of either), with headroom in length when only the length grows (the planner's batches grow
    in length) — each only while the KV cache stays within GROWN_SLOTS_SHARE of the device;
    at worst ``needed`` alone (positions rounded up to whole blocks)."""
    needed = replace(needed, positions=rounded_positions(needed.positions))
    if old is None or old.codebooks != needed.codebooks or old.vocab != needed.vocab:
        return needed
    union = replace(needed, capacity=max(old.capacity, needed.capacity),
                    positions=max(old.positions, needed.positions), steps=max(old.steps, needed.steps),
                    keep_hiddens=old.keep_hiddens or needed.keep_hiddens)
    candidates = [union, needed]
    if old.capacity >= needed.capacity:
        headroom = min(int(old.positions * 1.5), 4096)
        candidates.insert(0, replace(union, positions=max(union.positions, headroom)))

    return next((shape for shape in candidates
                 if cache_fits(shape.capacity, shape.positions, kv_bytes_per_position, device_bytes)),
                needed)


def cache_fits(rows: int, positions: int, kv_bytes_per_position: int, device_bytes: int | None) -> bool:
    """Whether a KV cache of ``rows`` × ``positions`` stays within GROWN_SLOTS_SHARE of the
    device (always on CPU: ``device_bytes`` None)."""
    return device_bytes is None or rows * positions * kv_bytes_per_position <= GROWN_SLOTS_SHARE * device_bytes


def fitting_rows(rows: int, positions: int, kv_bytes_per_position: int, device_bytes: int | None) -> int:
    """The most of ``rows`` slots of ``positions`` whose KV cache fits (``cache_fits``): all of
    them, else the largest of the steps' own row buckets that does (``row_buckets``: every 128
    rows above 128), if at least half of ``rows``; else 0. Fewer slots at a long sentence's
    length would hold fewer rows than the planner's batches of shorter sentences do on that card
    (a 24-GB card: 128 rows at the 2048-token cap, where a batch of 400-position sentences has
    ~500): there a stream's slots are its first batch's shape."""
    if cache_fits(rows, positions, kv_bytes_per_position, device_bytes):
        return rows
    assert device_bytes is not None  # a CPU fits them all
    most = int(GROWN_SLOTS_SHARE * device_bytes) // (positions * kv_bytes_per_position)
    fitting = max((bucket for bucket in row_buckets(rows) if bucket <= most), default=0)
    return fitting if 2 * fitting >= rows else 0


def device_bytes(gpt: FusedLlama) -> int | None:
    """What the slots may be sized from: the device's memory budget (its cap, if one is set);
    None on CPU, where slots are small and memory is not the limit."""
    return device_budget_bytes(gpt.norm.device)


class StepRunner:
    """Owns the slots of one token space and the graphs captured over them."""

    def __init__(self, gpt: FusedLlama, space: TokenSpace, use_graphs: bool) -> None:
        self.gpt = gpt
        self.space = space
        self.use_graphs = use_graphs
        self.state: SlotState | None = None
        self._graphs: dict[StepKind, torch.cuda.CUDAGraph] = {}
        self._pool = None
        self.captured = 0
        self.new_kinds = HostTime()  # the host time of step kinds' first runs and captures
        # admissions' prefills as graphs (prefill.py), where steps are graphs and memory uncapped
        self.prefills = PrefillGraphs(gpt, lambda device: self.use_graphs and mid_book_graphs_allowed(device),
                                      CAPTURE_LOCK)

    def slots_for(self, needed: SlotShape) -> SlotState:
        """Slots that hold ``needed``: the current ones if big enough, else new (graphs dropped).

        New slots hold both the old shape and the new one (when that fits, :func:`grown_shape`):
        a worker's batches alternate between few long sentences and many short ones, and slots
        sized for each batch alone would be re-made, and their graphs captured again, several
        times per book (~0.5 s each on an H200)."""
        if self.state is not None and self.state.shape.holds(needed):
            return self.state
        old = self.state.shape if self.state is not None else None
        self.release()
        exact = replace(needed, positions=rounded_positions(needed.positions))
        # Under a memory cap the planner sized each batch to fit with slots of its own shape: the
        # union of two batches' shapes (the most rows of one, the longest rows of the other)
        # would not, and every batch after it would run out of memory.
        capped = device_capped(self.gpt.norm.device)
        shape = exact if capped else grown_shape(old, needed, self.gpt.kv_bytes_per_position(),
                                                 device_bytes(self.gpt))
        if capped:  # the cap counts cached segments too: the old shape's must not crowd the new
            torch.cuda.empty_cache()
        try:
            self.state = SlotState(self.gpt, shape)
        except torch.cuda.OutOfMemoryError:
            if shape == exact:
                raise
            torch.cuda.empty_cache()
            log.info("slots of %s do not fit; allocating %s only", shape, exact)
            shape, self.state = exact, SlotState(self.gpt, exact)
        log.debug("slots allocated: %s (%.1f MiB)", shape, self.state.bytes() / 2**20)
        return self.state

    def release(self) -> None:
        """Free the slots and their graphs (before an out-of-memory retry, or to measure memory)."""
        self._graphs.clear()
        self._pool = None
        self.state = None

    def prepare(self, needed: SlotShape, greedy: bool = False, penalised: bool = True,
                candidates: int = candidate_count([SynthesisRequest.top_k]), every_row_count: bool = True) -> int:
        """Capture every step kind slots of ``needed`` can run with these sampling stages (the
        requests' defaults unless told; each live-row bucket by each attention bucket), so
        that no capture happens mid-batch; with ``every_row_count`` False only the full slots'
        steps (a stream's until its last rows: the fewer-row steps are captured when first run,
        at its end). The eager step before each capture runs on free slots only: it changes
        nothing that matters. Returns graphs made."""
        state = self.slots_for(needed)
        if not self.use_graphs:
            return 0
        before = self.captured
        positions = state.shape.positions
        attends = ([positions] if self.gpt.attention_reads_prefix_only()
                   else range(ATTEND_BUCKET, positions + 1, ATTEND_BUCKET))
        capacity = state.shape.capacity
        for rows in row_buckets(capacity) if every_row_count else [capacity]:
            for attend in attends:
                self.step(StepKind(rows=rows, attend=attend, greedy=greedy, penalised=penalised,
                                   candidates=candidates))
        return self.captured - before

    def step(self, kind: StepKind) -> None:
        if self.state is None:
            raise RuntimeError("no slots allocated")
        graph = self._graphs.get(kind)
        if graph is not None:
            _replay(graph, self.state.hidden.device)
            return
        if not self.use_graphs:
            decode_step(self.gpt, self.space, self.state, kind)
            return
        with self.new_kinds.timed():
            decode_step(self.gpt, self.space, self.state, kind)  # eager first: what the capture needs
            self._capture(kind)

    def _capture(self, kind: StepKind) -> None:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: CUDA calls of other threads (pinned-memory frees, say) do not
            # invalidate the capture; CAPTURE_LOCK keeps this process's own GPU work out of it
            with CAPTURE_LOCK, torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local",
                                                stream=_capture_stream(self.state)):
                decode_step(self.gpt, self.space, self.state, kind)
        except torch.OutOfMemoryError:
            # the capture's own allocations (its pool does not share the eager blocks) did not
            # fit: the batch is too big for this memory, which the out-of-memory policy answers
            # by halving; graphs stay on for the smaller batches
            raise
        except RuntimeError as exc:  # an op that cannot be captured: run eagerly from now on
            log.warning("CUDA graph capture failed (%s); decode steps run eagerly", exc)
            self.use_graphs = False
            self._graphs.clear()
            return
        self._graphs[kind] = graph
        self.captured += 1


def _replay(graph: torch.cuda.CUDAGraph, device: torch.device) -> None:
    """``graph`` replayed in order on the current stream, on the urgent one where URGENT_STEPS
    (a CUDA device: elsewhere, as in the CPU tests' stand-ins, there are no streams)."""
    if not URGENT_STEPS or device.type != "cuda":
        graph.replay()
        return
    urgent = _urgent_stream(device)
    with forked(urgent), torch.cuda.stream(urgent):
        graph.replay()


def _capture_stream(state: SlotState) -> torch.cuda.Stream | None:
    """Where a step is captured: the urgent stream where URGENT_STEPS, else PyTorch's own (None)."""
    if not URGENT_STEPS or state.hidden.device.type != "cuda":
        return None
    return _urgent_stream(state.hidden.device)


def _urgent_stream(device: torch.device) -> torch.cuda.Stream:
    return kept_stream("urgent steps", device, HIGHEST)

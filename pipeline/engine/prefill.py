"""Prefill: the causal pass over newcomers' prompts that fills their KV cache before they join the
decode slots, and the same pass replayed from a CUDA graph per padded shape.

An admission's prefill is ~350 kernels (20 layers of norms, projections, RoPE, cache writes,
attention) launched one by one from the decode loop's thread, on the steps' own stream: while the
host queues them the steps' queue runs dry. On the H200 the ~150 admissions of a 25.8-hour book
took 5.2 s of device time (9-11 s while Decoder+Vocos still launched op by op beside them). As a
graph an admission is one launch, and then its admission into the slots.

Measured on an H200 (25.8-hour book, in one call): prefill device time 5.65-7.51 -> 4.63-5.15 s,
the speaking 42.0-46.3 -> 39.2-40.1 s. Off with ``TTS_JOBS_PREFILL_GRAPHS=0``
(``EngineTuning.prefill_graphs``), under a memory cap, and for good once the engine gave its
memory back for an out-of-memory retry. An admission's rows are padded to a power of two and
its width to a multiple of WIDTH_BUCKET, at most POSITIONS positions in all; a larger one (a
batch's first, 1,024 rows) runs in pieces that fit (``rows_per_piece``). An eager prefill hands
each layer's keys and values to the slots as it makes them (``LoopRunner.prefill``): no fp16
cache of every layer is held (3.75 GiB of the H200's peak at 1,024 slots, when a batch's first
admission was one eager pass). Padding is invalid positions, masked out of every real query
(each padding query attends only to itself), so a real row's keys, values and last hidden state
are the eager ones. All graphs share one pool, one set of inputs, one key and one value buffer
per layer: admissions run one at a time. A shape's first admission runs eagerly on those
buffers, then the shape is captured (``graph_recording``: no stall of the decode steps).

On a GPU an admission runs at its padded shape whether or not it is graphed (``prefill_padded``
where there are no graphs: under a memory cap, with ``TTS_JOBS_PREFILL_GRAPHS=0``, after an
out-of-memory retry): other shapes run other kernels, whose fp16 rounding differs enough to
change a sampled token, so a capped card or a retried batch would speak other audio than the
card with graphs does. The tests hold the two ways to the same tokens.
"""

from __future__ import annotations

import threading

import torch

from pipeline.engine.gpt import FusedLlama, KVCache, LayerSink
from pipeline.engine.graph_recording import Allowed, GraphSet
from pipeline.engine.layer_ops import additive_mask
from pipeline.engine.prompts import PromptBatch

PREFILL_GRAPHS = True  # EngineTuning.prefill_graphs (loading.apply_tuning)
WIDTH_BUCKET = 32  # prompt positions an admission's width is rounded up to
POSITIONS = 16384  # rows x width of the largest graphed admission (128 rows of 128 positions)


def run_positions(gpt: FusedLlama, prompts: PromptBatch, cache: KVCache | LayerSink) -> torch.Tensor:
    """Causal pass over all of ``prompts``' positions, their keys and values into ``cache`` (or
    handed to a sink layer by layer); returns hidden states [B, P, C]."""
    width = prompts.width
    device = prompts.embeds.device
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    # A padding query may attend to itself so that no softmax row is empty (NaN would reach the
    # cache); real queries never see padding.
    diagonal = torch.eye(width, dtype=torch.bool, device=device)
    allowed = causal & (prompts.valid[:, None, :] | diagonal)
    mask = additive_mask(allowed, gpt.dtype)[:, None]
    return gpt(prompts.embeds.to(gpt.dtype), gpt.rope(prompts.positions), mask, cache)


def padded_shape(rows: int, width: int) -> tuple[int, int] | None:
    """The (rows, width) an admission runs at as a graph; None: too big, it runs eagerly."""
    padded = (1 << (rows - 1).bit_length(), -(-width // WIDTH_BUCKET) * WIDTH_BUCKET)
    return padded if padded[0] * padded[1] <= POSITIONS else None


def rows_per_piece(rows: int, width: int) -> int:
    """How many of an admission's ``rows`` prompts (at most ``width`` positions) are prefilled
    together: all where their padded shape fits a graph, else the most whose shape does (a power
    of two). So a batch's first admission (1,024 rows on an H200) runs in pieces of POSITIONS
    positions, graphed where graphs are on, and no admission's activations outgrow one piece's
    (~0.5 GB in fp16 at full size): a fixed cost, not one that grows with the batch under a cap."""
    padded_width = -(-width // WIDTH_BUCKET) * WIDTH_BUCKET
    if padded_width > POSITIONS:
        return rows  # no graph holds one such prompt: one eager pass
    return min(rows, 1 << ((POSITIONS // padded_width).bit_length() - 1))


def pads_admissions(device: torch.device) -> bool:
    """Whether admissions run at their padded shape there, graphed or not: where graphs may be
    (a GPU); a CPU runs each at its own shape (padding would only add work there)."""
    return device.type == "cuda"


def fill_padded(prompts: PromptBatch, index: torch.Tensor, embeds: torch.Tensor, valid: torch.Tensor,
                positions: torch.Tensor) -> None:
    """Rows ``index`` of ``prompts`` into the padded inputs [rows, width], right-aligned; the rest
    invalid (position 1, as upstream's padding; never attended to by a real query)."""
    embeds.zero_()
    valid.zero_()
    positions.fill_(1)
    width = embeds.shape[1]
    take = min(width, prompts.width)
    count = index.shape[0]
    embeds[:count, width - take:] = prompts.embeds[index, -take:]
    valid[:count, width - take:] = prompts.valid[index, -take:]
    positions[:count, width - take:] = prompts.positions[index, -take:]


def run_padded(gpt: FusedLlama, embeds: torch.Tensor, valid: torch.Tensor, positions: torch.Tensor,
               cache: KVCache | LayerSink) -> torch.Tensor:
    """The causal pass over padded inputs (``fill_padded``) into ``cache``; every row's last hidden state."""
    batch = PromptBatch(embeds=embeds, valid=valid, positions=positions, lengths=positions[:, 0])
    return run_positions(gpt, batch, cache)[:, -1]


def prefill_padded(gpt: FusedLlama, prompts: PromptBatch, index: torch.Tensor,
                   shape: tuple[int, int], sink: LayerSink) -> torch.Tensor:
    """Rows ``index`` of ``prompts`` prefilled eagerly at the padded ``shape`` a graph would replay
    (the same kernels, so the same values): each layer's keys and values of those rows [n, H, W, D]
    handed to ``sink`` as they are made (no cache of every layer: a capped card's admissions
    hold one layer's at a time), their last hidden states returned, as
    ``PrefillGraphs.prefill`` gives them."""
    rows, width = shape
    device = gpt.norm.device
    embeds = torch.empty(rows, width, gpt.hidden, dtype=gpt.dtype, device=device)
    valid = torch.empty(rows, width, dtype=torch.bool, device=device)
    positions = torch.empty(rows, width, dtype=torch.int64, device=device)
    fill_padded(prompts, index, embeds, valid, positions)
    count = index.shape[0]
    hidden = run_padded(gpt, embeds, valid, positions,
                        lambda layer, keys, values: sink(layer, keys[:count], values[:count]))
    return hidden[:count]


class PrefillGraphs(GraphSet):
    """The prefill graphs of one GPT; ``allowed(device)``: whether they may be kept there."""

    def __init__(self, gpt: FusedLlama, allowed: Allowed, lock: threading.Lock) -> None:
        super().__init__("admissions' prefill")
        self.gpt, self.allowed, self.lock = gpt, allowed, lock
        self._buffers: dict[str, torch.Tensor] = {}

    def wanted(self, device: torch.device) -> bool:
        return self.enabled and PREFILL_GRAPHS and self.allowed(device)

    def prefill(self, prompts: PromptBatch, index: torch.Tensor, width: int) -> tuple[KVCache, torch.Tensor]:
        """Rows ``index`` of ``prompts`` (none longer than ``width``; ``padded_shape`` must fit)
        prefilled at their padded shape: their KV cache [n, H, W, D] (views of the shared
        buffers: admit them before the next prefill) and last hidden states [n, C]."""
        count = index.shape[0]
        shape = padded_shape(count, width)
        assert shape is not None, "an admission too big for a graph runs eagerly"
        self._fill(prompts, index, *shape)
        graph = self.get(shape)
        if graph is not None:
            graph.replay()
        else:
            with self.new_shapes.timed():
                self._run(*shape)  # eagerly, on the buffers: the capture records the same
                self._capture(*shape)
        cache = self._cache(*shape)
        return (KVCache(keys=[k[:count] for k in cache.keys], values=[v[:count] for v in cache.values],
                        length=shape[1]), self._buffers["hidden"][:count])

    def release(self, for_good: bool = False) -> None:
        """Drop every graph, its pool and the buffers; ``for_good`` (an out-of-memory retry):
        prefill eagerly from then on."""
        super().release(for_good)
        self._buffers.clear()

    def _fill(self, prompts: PromptBatch, index: torch.Tensor, rows: int, width: int) -> None:
        fill_padded(prompts, index, *self._inputs(rows, width))

    def _run(self, rows: int, width: int) -> None:
        hidden = run_padded(self.gpt, *self._inputs(rows, width), self._cache(rows, width))
        self._buffers["hidden"][:rows].copy_(hidden)

    def _capture(self, rows: int, width: int) -> None:
        with self.lock:  # no Decoder+Vocos launch meanwhile
            self.capture((rows, width), self.gpt.norm.device, lambda: self._run(rows, width))

    def _inputs(self, rows: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        gpt, count = self.gpt, rows * width
        if not self._buffers:
            device = gpt.norm.device
            self._buffers.update(
                embeds=torch.zeros(POSITIONS, gpt.hidden, dtype=gpt.dtype, device=device),
                valid=torch.zeros(POSITIONS, dtype=torch.bool, device=device),
                positions=torch.ones(POSITIONS, dtype=torch.int64, device=device),
                hidden=torch.zeros(POSITIONS // WIDTH_BUCKET, gpt.hidden, dtype=gpt.dtype, device=device),
                **{f"{kind}{layer}": torch.zeros(POSITIONS * gpt.hidden, dtype=gpt.dtype, device=device)
                   for layer in range(len(gpt.layers)) for kind in ("k", "v")})
        b = self._buffers
        return (b["embeds"][:count].view(rows, width, gpt.hidden), b["valid"][:count].view(rows, width),
                b["positions"][:count].view(rows, width))

    def _cache(self, rows: int, width: int) -> KVCache:
        """The shared key/value buffers as one admission's cache [rows, H, width, D] (empty)."""
        gpt = self.gpt
        shape = (rows, gpt.heads, width, gpt.head_dim)
        size = rows * width * gpt.hidden
        return KVCache(keys=[self._buffers[f"k{i}"][:size].view(shape) for i in range(len(gpt.layers))],
                       values=[self._buffers[f"v{i}"][:size].view(shape) for i in range(len(gpt.layers))])

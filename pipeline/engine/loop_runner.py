"""The generation loop's device side: it executes what the scheduler (``generation.py``) decides —
prefill newcomers into slots, run a chunk of decode steps, copy which rows are done to the host,
take finished rows out, move live rows to the front — and knows nothing of which row should go
where or when.

Kept apart as vLLM v1 keeps its model runner apart from its scheduler: the scheduler's decisions
can be read and tested on their own, and every launch onto the device is in this one module.
"""

from __future__ import annotations

import torch

from pipeline.engine.decode_step import StepKind, TokenSpace, run_gpt_step
from pipeline.engine.gpt import FusedLlama, LayerSink
from pipeline.engine.host_lists import to_device
from pipeline.engine.prefill import (
    padded_shape,
    pads_admissions,
    prefill_padded,
    rows_per_piece,
    run_positions,
)
from pipeline.engine.prompts import PromptBatch
from pipeline.engine.sampling import RowSampling
from pipeline.engine.slots import Newcomers, SlotShape, SlotState, admit, compact, take_finished
from pipeline.engine.step_graphs import StepRunner, attend_bucket
from pipeline.engine.timing import PhaseClock


class LoopRunner:
    """The slots of one generation loop on the device, and every launch that touches them."""

    def __init__(self, gpt: FusedLlama, space: TokenSpace, runner: StepRunner, clock: PhaseClock,
                 shape: SlotShape) -> None:
        self.gpt, self.space, self.runner, self.clock = gpt, space, runner, clock
        self.state: SlotState = runner.slots_for(shape)
        self.kv_bytes = gpt.kv_bytes_per_position()
        self.weight_bytes = sum(t.numel() * t.element_size() for t in gpt.parameters())
        self.prefix_only = gpt.attention_reads_prefix_only()

    @property
    def shape(self) -> SlotShape:
        return self.state.shape

    @property
    def keeps_hiddens(self) -> bool:
        return self.state.hiddens is not None

    def steps(self, live: int, steps: int, longest: int, sampling: RowSampling) -> None:
        """``steps`` decode steps over the first ``live`` slots, the longest row having written
        ``longest`` positions before them."""
        positions = self.state.shape.positions
        for k in range(steps):
            # With prefix-only attention the length is no part of a step's shape: one graph
            # per live-slot bucket serves every length.
            attend = positions if self.prefix_only else attend_bucket(longest + k + 1, positions)
            self.runner.step(StepKind(rows=live, attend=attend, greedy=sampling.greedy,
                                      penalised=sampling.penalised, candidates=sampling.candidates))
            self.clock.count_step(self.weight_bytes + live * (longest + k + 1) * self.kv_bytes)

    def done_flags(self, live: int, slot_rows: list[int | None]) -> DoneFlags:
        return DoneFlags.take(self.state, live, slot_rows)

    def take_finished(self, slots: list[int], produced: list[int]
                      ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        return take_finished(self.state, slots, produced)

    def prefill(self, prompts: PromptBatch, indices: list[int], slots: list[int], lengths: list[int],
                min_new: list[int], max_new: list[int], sampling: RowSampling) -> None:
        """Rows ``indices`` of ``prompts`` (with their host ``lengths`` and limits) prefilled and
        admitted into ``slots``, in pieces a graph holds (``rows_per_piece``)."""
        step = rows_per_piece(len(indices), max(lengths))
        for at in range(0, len(indices), step):
            part = slice(at, at + step)
            self._prefill_piece(prompts, indices[part], slots[part], lengths[part], min_new[part],
                                max_new[part], sampling)

    def _prefill_piece(self, prompts: PromptBatch, indices: list[int], slots: list[int],
                       lengths: list[int], min_new: list[int], max_new: list[int],
                       sampling: RowSampling) -> None:
        """Rows ``indices`` prefilled together. An eager prefill hands each layer's keys and
        values to the slots as it makes them (``into_slots``): no cache of every layer's."""
        width = max(lengths)
        index = to_device(indices, prompts.embeds.device)
        into_slots = self._into_slots(slots, prompts.lengths[index])
        graphs = self.runner.prefills
        graphed = graphs.wanted(index.device)
        shape = padded_shape(len(indices), width) if graphed or pads_admissions(index.device) else None
        cache = None  # an eager prefill puts its keys and values into the slots itself
        if shape is not None and graphed:
            cache, hidden = graphs.prefill(prompts, index, width)  # one replay (prefill.py)
        elif shape is not None:  # as a graph would run it, so the same values (prefill.py)
            hidden = prefill_padded(self.gpt, prompts, index, shape, into_slots)
        else:
            batch = PromptBatch(embeds=prompts.embeds[index, -width:], valid=prompts.valid[index, -width:],
                                positions=prompts.positions[index, -width:], lengths=prompts.lengths[index])
            hidden = run_positions(self.gpt, batch, into_slots)[:, -1]
        admit(self.state, Newcomers(slots=slots, cache=cache, last_hidden=hidden, lengths=prompts.lengths[index],
                                    min_new=to_device(min_new, index.device),
                                    max_new=to_device(max_new, index.device),
                                    sampling=sampling.select(index)))

    def _into_slots(self, slots: list[int], lengths: torch.Tensor) -> LayerSink:
        """A prefill's keys and values [n, H, w, D], a layer at a time, into the slot cache."""
        cache, index = self.state.cache, to_device(slots, lengths.device)

        def sink(layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
            cache.admit(layer, index, keys, values, lengths)

        return sink

    def compact(self, occupied: list[int]) -> None:
        compact(self.state, occupied)


class DoneFlags:
    """Which of the first ``live`` slots were done after a chunk of steps, how many tokens each
    kept and whether it hit ``max_new``: copied to pinned host memory behind the chunk, read at
    the next harvest. ``slot_rows`` is which row each slot held when they were taken."""

    def __init__(self, host: torch.Tensor, event: torch.cuda.Event | None,
                 slot_rows: list[int | None]) -> None:
        self.host, self.event, self.slot_rows = host, event, slot_rows
        self.order = list(range(len(slot_rows)))  # slot now -> slot when taken

    @staticmethod
    def take(state: SlotState, live: int, slot_row: list[int | None]) -> DoneFlags:
        flags = torch.stack([state.done[:live].long(), state.produced[:live],
                             state.hit_limit[:live].long()])
        if not flags.is_cuda:
            return DoneFlags(flags, None, list(slot_row))
        host = torch.empty(flags.shape, dtype=flags.dtype, pin_memory=True)
        host.copy_(flags, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return DoneFlags(host, event, list(slot_row))

    def follow(self, moved: list[int]) -> None:
        """Slots ``moved`` went to the front, in that order (``compact``)."""
        self.order = [self.order[i] for i in moved] + [-1] * (len(self.order) - len(moved))

    def read(self) -> list[tuple[int | None, bool, int, bool]]:
        """Per slot now: (row when taken, done, tokens kept, hit max_new)."""
        if self.event is not None:
            self.event.synchronize()
        done, produced, hit = self.host.tolist()
        live = len(done)
        return [(self.slot_rows[t], bool(done[t]), produced[t], bool(hit[t]))
                if 0 <= t < live else (None, False, 0, False) for t in self.order]


def score_tokens(gpt: FusedLlama, space: TokenSpace, prompts: PromptBatch,
                 forced: torch.Tensor) -> torch.Tensor:
    """Teacher forcing through the decode path that generation runs (prefill, admission into
    slots, their KV cache — int8 where it is — and the decode attention): logits [B, T, Q, V]
    for tokens t_0..t_{T-1}, where ``forced`` [B, T-1, Q] holds t_0..t_{T-2}. The prompt's last
    hidden state predicts t_0; each forced token then runs one position as a sampled one would."""
    rows, steps = prompts.rows, forced.shape[1] + 1
    device = prompts.embeds.device
    state = SlotState(gpt, SlotShape(
        capacity=rows, positions=int(prompts.lengths.max()) + steps, steps=steps,
        codebooks=space.codebooks, vocab=space.vocab, keep_hiddens=False))
    cache = gpt.new_cache(rows, prompts.width)
    last_hidden = run_positions(gpt, prompts, cache)[:, -1]
    everyone = torch.arange(rows, device=device)
    steps_col = torch.full((rows,), steps, dtype=torch.int64, device=device)
    admit(state, Newcomers(slots=list(range(rows)), cache=cache, last_hidden=last_hidden,
                           lengths=prompts.lengths, min_new=steps_col, max_new=steps_col,
                           sampling=state.sampling.select(everyone)))
    kind = StepKind(rows=rows, attend=state.shape.positions, greedy=True, penalised=False)
    alive = torch.ones(rows, dtype=torch.bool, device=device)
    logits = [space.logits(state.hidden)]
    for k in range(steps - 1):
        run_gpt_step(gpt, space, state, kind, forced[:, k].to(device), alive)
        logits.append(space.logits(state.hidden))
    return torch.stack(logits, 1)

"""The engine's memory side: its decode slots and their CUDA graphs, the device's budget, and the
memory model the planner sizes batches by (calibrated by ``Engine.warm_up`` on CUDA, analytic
elsewhere). A part of ``Engine`` (its base class), kept here so that each file reads as one concern."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pipeline.batching import MemoryModel
from pipeline.engine.calibration_file import calibration_key, load_calibration, save_calibration
from pipeline.engine.memory import (
    PLANNER_SHARE,
    analytic_memory_model,
    calibrate_capped_memory_model,
    calibrate_memory_model,
    device_budget_bytes,
    device_capped,
    model_with_widest_slots,
    release_cached_memory,
)
from pipeline.engine.slots import SlotShape
from pipeline.engine.step_graphs import StepRunner, device_bytes, fitting_rows, rounded_positions
from pipeline.lengths import MAX_TOKENS_CAP

if TYPE_CHECKING:
    from pipeline.engine.model_parts import ModelParts

log = logging.getLogger(__name__)

WORKER_PROMPT_TOKENS = 128  # prompt room in a worker's prepared slots (a long sentence's prompt fits)


class EngineMemory:
    """Slots, budget and memory model of an ``Engine`` (which sets these attributes)."""

    device: str
    precision: str
    _parts: ModelParts
    _runner: StepRunner
    _memory: MemoryModel | None
    _widest_slots_ready: bool  # prepare_worker_slots allocated the widest batch's slots
    _worker_rows: int | None  # the rows a worker's batches have (a stream's slots)
    _torch_device: torch.device

    @torch.inference_mode()
    def prepare_slots(self, slots: int, prompt_tokens: int, max_new_tokens: int,
                      every_row_count: bool = True) -> int:
        """Allocate decode slots for ``slots`` sentences of up to ``prompt_tokens`` +
        ``max_new_tokens`` positions and capture their CUDA graphs now, not mid-batch (default
        sampling: top-k > 1 with a repetition penalty); ``every_row_count`` False: only the full
        slots' (``StepRunner.prepare``). Returns how many graphs were captured."""
        emb = self._parts.embeddings
        shape = SlotShape(capacity=slots, positions=prompt_tokens + max_new_tokens,
                          steps=max_new_tokens, codebooks=emb.codebooks, vocab=emb.vocab,
                          keep_hiddens=True)
        return self._runner.prepare(shape, every_row_count=every_row_count)

    def prepare_worker_slots(self, rows: int) -> int:
        """On CUDA: slots and graphs for the widest, longest batch a worker may be sent — ``rows``
        sentences at the 2048-token cap — if their KV cache fits ``GROWN_SLOTS_SHARE`` of the
        device (an H200: 1024 rows, 73 GB); on a smaller card with no cap, as many of the rows as
        fit if half or more (an H100: 640; ``fitting_rows``), which its streams keep in flight
        whatever their first batch (a shelf's first, the 3-hour book's first wave of 363 rows,
        held the whole stream to ~310 live rows a step on an H100: 18,321 steps where 640 rows
        took 10,552-10,977); under a cap, or on a card that fits fewer, none (slots then
        follow the batches, as planned to fit). A worker calls this once after ``warm_up``: no
        batch then re-makes slots or captures graphs (each costs ~0.5 s mid-batch on an H200).
        Returns the graphs captured."""
        gpt = self._parts.gpt
        total = device_bytes(gpt)
        positions = rounded_positions(WORKER_PROMPT_TOKENS + MAX_TOKENS_CAP)
        if total is None:
            self._worker_rows = rows  # on CPU memory is not the limit
            return 0
        fitting = fitting_rows(rows, positions, gpt.kv_bytes_per_position(), total)
        if not fitting or (fitting < rows and self.memory_capped()):
            return 0  # a capped or smaller card: a stream's slots are its first batch's, as planned to fit
        graphs = self.prepare_slots(fitting, WORKER_PROMPT_TOKENS, MAX_TOKENS_CAP)
        self._worker_rows = fitting
        # the planner's cache slope holds where every batch it may send fits the slots whole
        self._widest_slots_ready = fitting == rows
        log.info("worker decode slots: %d rows of %d positions (of the widest batch's %d rows), %d CUDA graphs",
                 fitting, positions, rows, graphs)
        return graphs

    def memory_capped(self) -> bool:
        """Whether this engine runs under a memory cap (``EngineConfig.memory_gib``)."""
        return device_capped(self._torch_device)

    def kv_bytes_per_position(self) -> int:
        """Bytes of keys and values one decode slot position holds (all layers)."""
        return self._parts.gpt.kv_bytes_per_position()

    def memory_budget_bytes(self) -> int | None:
        """GPU memory this engine may use (its cap, ``EngineConfig.memory_gib``, else the card's);
        None on CPU."""
        return device_budget_bytes(self._torch_device)

    def quantized_kv(self) -> bool:
        """Whether the decode slots keep keys and values in int8 (``EngineConfig.kv_cache``)."""
        return self._parts.gpt.quantized_kv()

    def release_slots(self) -> None:
        """Free the decode slots and their CUDA graphs (they are kept between batches)."""
        self._runner.release()

    def release_device_memory(self) -> None:
        """Everything kept between batches given back: slots, graphs (and their pools), the
        allocator's cached blocks, library workspaces (``oom.py`` calls it before a retry).
        Decoder+Vocos chunks and prefills run eagerly from then on (their graphs' pools keep
        memory a device short of it cannot spare)."""
        self.release_slots()
        self._parts.waveform.graphs.release(for_good=True)
        self._runner.prefills.release(for_good=True)
        release_cached_memory(self._torch_device)

    @property
    def calibrated_memory_model(self) -> MemoryModel | None:
        """The model ``warm_up`` measured on CUDA; None before that, and on CPU."""
        return self._memory

    def memory_model(self) -> MemoryModel:
        """Calibrated by ``warm_up`` on CUDA (with the cache's own slope once
        ``prepare_worker_slots`` holds the widest batch); an analytic, conservative model otherwise."""
        if self._memory is not None and not self._widest_slots_ready:
            return self._memory
        analytic = analytic_memory_model(self._parts.gpt, self._parts.waveform)
        return analytic if self._memory is None else model_with_widest_slots(self._memory, analytic)

    def take_kept_calibration(self, kept_in: Path | None) -> bool:
        """The memory model an earlier run of the same model calibrated on this CUDA device and
        kept in ``kept_in``, taken; whether there was one. Before the warm-up batch: a run plans
        its book meanwhile (the planner needs no more of the engine than this model)."""
        if kept_in is None or self._torch_device.type != "cuda":
            return False
        kept = load_calibration(kept_in, calibration_key(self._calibration_facts()))
        if kept is not None:
            self._memory = kept
            log.info("memory model on %s/%s as calibrated before: %s", self.device, self.precision, kept)
        return kept is not None

    def _calibrate(self, voice: str, kept_in: Path | None = None) -> None:
        """The memory model measured on this CUDA device (under its cap, where it has one), or
        the one measured by an earlier run of the same model here, kept in ``kept_in``."""
        if self.take_kept_calibration(kept_in):
            return
        self._measure_memory_model(voice)
        if kept_in is not None and self._memory is not None:
            save_calibration(kept_in, calibration_key(self._calibration_facts()), self._memory)

    def _calibration_facts(self) -> dict[str, object]:
        """What a calibration depends on: the device and its cap, the model's shapes, precision and
        KV cache, and the software that runs them."""
        props = torch.cuda.get_device_properties(self._torch_device)
        shapes = hashlib.sha256()
        for module in (self._parts.gpt, self._parts.waveform.decoder, self._parts.waveform.vocos):
            for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
                shapes.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
        return {"device": props.name, "memory": props.total_memory, "torch": torch.__version__,
                "cap": self.memory_budget_bytes() if self.memory_capped() else None,
                "precision": self.precision, "kv_int8": self.quantized_kv(), "shapes": shapes.hexdigest()}

    def _measure_memory_model(self, voice: str) -> None:
        engine: Any = self
        budget = self.memory_budget_bytes() if self.memory_capped() else None
        self._memory = (calibrate_capped_memory_model(engine, voice, int(PLANNER_SHARE * budget))
                        if budget else calibrate_memory_model(engine, voice))
        log.info("memory model calibrated on %s/%s: %s", self.device, self.precision, self._memory)

"""tts-jobs rows of the benchmark: the engine in one precision, timed as a worker runs it.

The engine is loaded and warmed up as a worker is (``warm_up``, its slots prepared, one batch of
other sentences), then timed from text in to float waveforms out: the planner's global length sort
and memory-capped batches of at most ``batch`` rows, each through the engine's out-of-memory
policy (``oom.synthesize_fitting``).
Fidelity: against fp32 on the same weights, teacher-forced GPT top-1 agreement and Decoder+Vocos
SNR from identical hidden states (``fidelity.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.bench.harness import host_profile, peak_gib, release_device_memory, sync_device
from pipeline.bench.protocol import (
    BenchOptions,
    forced_requests,
    forced_steps,
    make_workload,
    planner_share,
    spread,
)
from pipeline.bench.report import BenchRow
from pipeline.types import GPT_STEPS_PER_SECOND, Batch, PlannedSentence, SynthesisRequest, SynthesisResult

if TYPE_CHECKING:  # torch loads only once a row runs: ``--help`` and the report stay instant
    from pipeline.bench.fidelity import ReferenceData

Say = Callable[[str], None]
CPU_MEMORY_CAP = 8 * 2**30  # the planner's cap on CPU, where memory is not what limits a batch


@dataclass(frozen=True)
class Variant:
    """A precision as the command line names it: ``fp16``, ``int8-dyn``, ``bf16-kvint8``, ..."""

    precision: str  # EngineConfig.precision
    kv_cache: str | None  # EngineConfig.kv_cache; None: the engine's default
    int8_scheme: str  # load_engine's int8_scheme

    @staticmethod
    def parse(name: str) -> Variant:
        precision, kv_cache = name.split("-kv", 1) if "-kv" in name else (name, None)
        if precision == "int8-dyn":
            return Variant("int8", kv_cache, "dynamic")
        return Variant(precision, kv_cache, "weight_only")

    def int8_note(self, on_gpu: bool) -> str:
        if self.precision != "int8":
            return ""
        if not on_gpu:
            return "torch.ao dynamic int8"
        return ("torchao int8 weight-only" if self.int8_scheme == "weight_only"
                else "torchao int8 dynamic (W8A8)")


@dataclass(frozen=True)
class _Timed:
    """What the timed region measured."""

    wall: float
    batches: int
    peak: float | None
    phases: dict[str, float]  # PhaseClock.totals
    edges: dict[str, float]  # PhaseClock.edges
    steps: int  # decode steps run
    step_bytes: int  # bytes those steps must read


def fp32_reference(model_dir: Path, device: Any, texts: list[str], steps: list[int],
                   opts: BenchOptions, say: Say) -> tuple[ReferenceData, str]:
    """fp32 reference data for the fidelity columns (one engine in memory at a time), and the
    voice every system reads with."""
    from pipeline.bench import fidelity
    from pipeline.engine import EngineConfig
    from pipeline.engine.loading import load_engine

    engine = load_engine(EngineConfig(model_dir=model_dir, device=str(device), precision="fp32"))
    voice = engine.sample_voice(opts.seed)
    picked = spread(len(texts), opts.fidelity_sentences)
    requests = forced_requests([texts[i] for i in picked], [steps[i] for i in picked], voice,
                               opts.seed)
    ref = fidelity.reference_data(engine, requests)
    say(f"fidelity reference: {len(requests)} sentences in fp32")
    del engine
    release_device_memory()
    return ref, voice


def run_engine_rows(model_dir: Path, device: Any, name: str, texts: list[str], steps: list[int],
                    opts: BenchOptions, ref: ReferenceData) -> list[BenchRow]:
    """tts-jobs rows of one precision: load, warm up, time the workload ``opts.repeat`` times on
    the same engine (a row each: the spread between runs of one code), measure fidelity once;
    memory given back."""
    from pipeline.bench import fidelity
    from pipeline.engine import EngineConfig
    from pipeline.engine.loading import load_engine

    variant = Variant.parse(name)
    started = time.perf_counter()
    engine = load_engine(EngineConfig(model_dir=model_dir, device=str(device),
                                      precision=variant.precision, kv_cache=variant.kv_cache,
                                      memory_gib=opts.memory_gib),
                         int8_scheme=variant.int8_scheme)
    kv_int8 = engine.quantized_kv()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    requests, graphs, warmup_s = _warm_up_as_a_worker(engine, device, texts, steps, opts)
    warm_batch_s = time.perf_counter() - started - warmup_s
    timed = [_timed_run(engine, device, f"{name}-{opts.batch}", requests, texts, steps, opts)
             for _ in range(max(1, opts.repeat))]
    quality = fidelity.measure(engine, ref)
    del engine
    release_device_memory()
    audio = sum(steps) / GPT_STEPS_PER_SECOND
    on_gpu = device.type == "cuda"
    note = _join(variant.int8_note(on_gpu), "KV cache int8" if kv_int8 else "",
                 f"{graphs} CUDA graphs" if graphs else "")
    if opts.memory_gib and on_gpu:
        note = _join(f"capped at {opts.memory_gib:g} GiB", note)
    return [BenchRow(system="tts-jobs", precision=name, batch=opts.batch, sentences=len(texts),
                     audio_s=audio, wall_s=run.wall, x_realtime=audio / run.wall,
                     peak_gib=run.peak, top1_agreement=quality.top1_agreement,
                     relative_logit_error=quality.relative_logit_error, snr_db=quality.snr_db,
                     load_s=load_s, warmup_s=warmup_s, warm_batch_s=warm_batch_s, batches=run.batches, slots=opts.slots,
                     note=_join(note, f"run {number} of {len(timed)}" if len(timed) > 1 else ""),
                     **_time_columns(run, on_gpu))
            for number, run in enumerate(timed, start=1)]


def _warm_up_as_a_worker(engine: Any, device: Any, texts: list[str], steps: list[int],
                         opts: BenchOptions) -> tuple[list[SynthesisRequest], int, float]:
    """``warm_up``, the slots and graphs for the workload, then the protocol's warm-up batches,
    planned like the timed ones but of other sentences: the memory allocator, pinned host buffers
    and FFT plans are then as a worker has them after its first batches. Under a memory cap no
    slots are prepared ahead: each batch gets slots of its own shape, as on a capped worker.
    Returns the timed run's requests, the CUDA graphs captured ahead and the seconds of the
    engine's own warm-up (up to the protocol's batches, which are work of the workload's size)."""
    started = time.perf_counter()
    engine.warm_up()
    voice = engine.sample_voice(opts.seed)
    requests = forced_requests(texts, steps, voice, opts.seed)
    slots, graphs = opts.slots or (None if opts.memory_gib else opts.batch), 0
    if slots:
        graphs = engine.prepare_slots(slots, max(engine.prompt_tokens_of(texts)), max(steps))
    sync_device(device)
    warm_up_s = time.perf_counter() - started
    warm_texts = make_workload(min(opts.batch, len(texts)), opts.seed + 1)
    warm_steps = [min(forced_steps(t), max(steps)) for t in warm_texts]
    warm_requests = forced_requests(warm_texts, warm_steps, voice, opts.seed + 1)
    for batch in _plan(engine, warm_texts, warm_steps, opts):
        _synthesize(engine, [warm_requests[i] for i in batch.sentence_ids])
    return requests, graphs, warm_up_s


def _timed_run(engine: Any, device: Any, label: str, requests: list[SynthesisRequest],
               texts: list[str], steps: list[int], opts: BenchOptions) -> _Timed:
    """Text in to waveforms out: tokenize, plan, synthesize every batch."""
    engine.slots = opts.slots
    engine.forget_prompts()  # the warm-up tokenized these texts; the timed run tokenizes them again
    sync_device(device, reset_peak=True)
    engine.clock.reset()
    with host_profile(label, opts.profile_dir, opts.trace_dir):
        started = time.perf_counter()
        batches = _plan(engine, texts, steps, opts)
        produced = 0
        for batch in batches:
            results = _synthesize(engine, [requests[i] for i in batch.sentence_ids])
            produced += sum(r.gpt_steps for r in results)
        sync_device(device)
        wall = time.perf_counter() - started
    peak = peak_gib(device)
    if produced != sum(steps):
        raise RuntimeError(f"tts-jobs produced {produced} steps, expected {sum(steps)}")
    clock = engine.clock
    return _Timed(wall=wall, batches=len(batches), peak=peak, phases=clock.totals(),
                  edges=clock.edges(), steps=clock.steps, step_bytes=clock.step_bytes)


def _plan(engine: Any, texts: list[str], steps: list[int], opts: BenchOptions) -> list[Batch]:
    """The planner's batches for the workload: globally length-sorted, at most ``opts.batch``
    rows, capped by the engine's memory model at the planner's share of its memory budget."""
    from pipeline.batching import PlanLimits, plan_batches

    budget = engine.memory_budget_bytes()
    cap = int(budget * planner_share(opts)) if budget else CPU_MEMORY_CAP
    planned = [PlannedSentence(id=i, max_new_tokens=n, prompt_tokens=p)
               for i, (n, p) in enumerate(zip(steps, engine.prompt_tokens_of(texts)))]
    return plan_batches(planned, PlanLimits(memory_cap_bytes=cap, max_rows=opts.batch), engine.memory_model())


def _synthesize(engine: Any, requests: list[SynthesisRequest]) -> list[SynthesisResult]:
    """The batch through the engine's out-of-memory policy, as a worker runs it
    (``oom.synthesize_fitting``); a sentence that does not fit even alone ends the run."""
    from pipeline.engine.oom import synthesize_fitting

    outcomes, _ = synthesize_fitting(engine, requests)
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome
    return outcomes  # type: ignore[return-value]


def _time_columns(timed: _Timed, on_gpu: bool) -> dict[str, Any]:
    """Where the time went: GPU seconds per phase, the GPU's timeline (on the GPU), the steps'
    achieved bandwidth."""
    phases, edges, gpt_s = timed.phases, timed.edges, timed.phases["gpt_steps"]
    return {"gpt_s": gpt_s, "prefill_s": phases["prefill"], "waveform_s": phases["waveform"],
            "host_s": max(0.0, timed.wall - sum(phases.values())),
            "idle_start_s": edges["idle_start"] if on_gpu else None,
            "idle_between_s": edges["idle_between"] if on_gpu else None,
            "tail_s": edges["tail"] if on_gpu else None,
            "after_s": max(0.0, timed.wall - edges["busy_end"]) if on_gpu else None,
            "steps": timed.steps, "step_ms": 1000 * gpt_s / max(timed.steps, 1),
            "bandwidth_tbs": timed.step_bytes / gpt_s / 1e12 if gpt_s else None}


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)

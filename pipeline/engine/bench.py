"""Throughput benchmark, following shared/PERFORMANCE.md's protocol.

Workload: N mixed-length sentences (10-60 characters, Chinese and English) in book order, each
forced to L = round(chars * 4.7) GPT steps (min = max = L). Useful audio = sum(L) / 46.875 s.
Timed from text in to float waveforms out. Model load and one warm-up batch are reported apart.

- tts-jobs rows: the planner's global length sort + memory-capped batches of at most ``batch``
  rows, through ``synthesize_with_oom_halving``; one row per precision.
- upstream rows: ``Chat.infer(batch, split_text=False, skip_refine_text=True)`` in fp32 with
  batches in book order, each batch forced to its largest L and credited only sum(L), at batch 4
  and at larger sizes; the best is picked in the same run. A row stops after the batch that
  passes ``upstream_seconds`` (x real time is a rate; the row says how many sentences it used).
- Fidelity (tts-jobs rows): against fp32 on the same weights, teacher-forced GPT top-1 agreement
  and Decoder+Vocos SNR from identical hidden states.

Run: ``python -m pipeline.engine.bench --synthetic full --device cuda --json out.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import logging
import math
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline.types import GPT_STEPS_PER_SECOND, PlannedSentence, SynthesisRequest

log = logging.getLogger(__name__)

STEPS_PER_CHAR = 4.7
_HANZI = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"
          "下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量"
          "都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重"
          "新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已"
          "通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将")
_WORDS = (
    "the", "of", "and", "to", "in", "is", "was", "he", "that", "it", "his", "her", "you", "as",
    "had", "with", "for", "she", "not", "at", "but", "be", "my", "on", "have", "him", "which", "by",
    "this", "all", "they", "so", "were", "from", "one", "said", "me", "when", "there", "what", "we",
    "no", "if", "would", "an", "could", "been", "more", "out", "them", "some", "then", "into",
    "time", "very", "about", "like", "man", "little", "only", "other", "over", "before", "two",
    "now", "down", "upon", "old", "such", "house", "great", "night", "never", "long", "made",
    "know", "first", "good", "way", "came", "eyes", "own", "hand", "say", "much", "life", "went",
    "must", "might", "again", "well", "way", "door", "looked", "room"
)


@dataclass(frozen=True)
class BenchOptions:
    """What to benchmark. Exactly one of ``model_dir`` / ``synthetic``."""

    model_dir: Path | None = None
    synthetic: str | None = None  # "tiny" | "full": written to a temp dir, seed ``seed``
    device: str = "auto"
    precisions: tuple[str, ...] = ()  # () = fp32,fp16,bf16,int8 on CUDA; fp32,int8 on CPU
    sentences: int | None = None  # None = 1024 on CUDA, 48 on CPU
    seed: int = 0
    batch: int = 256  # tts-jobs: most rows in one planned batch (the pool the slots draw from)
    slots: int | None = None  # tts-jobs: rows decoded at once; None = the whole batch
    scaling_batches: tuple[int | tuple[int, int], ...] | None = None  # more tts-jobs rows at
    # these batch sizes (or (batch, slots) pairs: a pool bigger than the slots), in
    # the first reduced precision; None = 64,512 on CUDA, none on CPU
    upstream_batches: tuple[int, ...] | None = None  # None = 4,64,256,512 on CUDA; 4,16 on CPU
    upstream: bool = True
    fidelity_sentences: int = 16
    memory_fraction: float = 0.5  # planner cap as a share of the device's memory
    upstream_seconds: float = 75.0  # stop an upstream row after the batch that passes this
    max_steps: int | None = None  # cap on L, for quick smoke runs only (not the protocol)


@dataclass(frozen=True)
class BenchRow:
    system: str  # "tts-jobs" | "upstream"
    precision: str
    batch: int
    sentences: int
    audio_s: float
    wall_s: float
    x_realtime: float
    peak_gib: float | None
    top1_agreement: float | None = None
    relative_logit_error: float | None = None
    snr_db: float | None = None
    load_s: float | None = None
    warmup_s: float | None = None
    batches: int = 0
    slots: int | None = None
    gpt_s: float | None = None  # GPU time in decode steps
    prefill_s: float | None = None  # GPU time in prompt prefill
    waveform_s: float | None = None  # GPU time in Decoder + Vocos
    host_s: float | None = None  # wall - the above: the GPU waiting on the CPU
    idle_start_s: float | None = None  # GPU idle before its first phase (tokenising, planning)
    idle_between_s: float | None = None  # GPU idle between its phases (waiting on the host)
    tail_s: float | None = None  # Decoder+Vocos after the last decode step
    after_s: float | None = None  # wall time after the GPU's last phase (results to the host)
    steps: int | None = None  # decode steps run
    step_ms: float | None = None  # GPU time per decode step
    bandwidth_tbs: float | None = None  # bytes the steps must read / their GPU time
    note: str = ""


@dataclass(frozen=True)
class BenchReport:
    rows: tuple[BenchRow, ...]
    device: str
    weights: str
    date: str
    command: str = ""
    ratios: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        rows = [{k: clean(v) for k, v in asdict(r).items()} for r in self.rows]
        return json.dumps({"rows": rows, "device": self.device, "weights": self.weights,
                           "date": self.date, "command": self.command, "ratios": self.ratios},
                          indent=2, ensure_ascii=False)


# ------------------------------------------------------------------------------------ workload
def make_workload(count: int, seed: int) -> list[str]:
    """``count`` sentences of 10-60 characters in book order: Chinese, English and mixed."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        target = rng.randint(10, 60)
        kind = rng.random()
        if kind < 0.5:
            texts.append(_chinese(rng, target))
        elif kind < 0.9:
            texts.append(_english(rng, target))
        else:
            half = target // 2
            texts.append(_chinese(rng, half) + " " + _english(rng, target - half - 1))
    return texts


def _chinese(rng: random.Random, length: int) -> str:
    chars = [rng.choice(_HANZI) for _ in range(length - 1)]
    return "".join(chars) + "。"


def _english(rng: random.Random, length: int) -> str:
    words: list[str] = []
    while len(" ".join(words)) < length:
        words.append(rng.choice(_WORDS))
    text = " ".join(words)[: length - 1]
    if text.endswith(" "):
        text = text[:-1] + "s"  # keep the exact length
    return text[0].upper() + text[1:] + "."


def forced_steps(text: str) -> int:
    return max(1, round(len(text) * STEPS_PER_CHAR))


# ------------------------------------------------------------------------------------ running
def run_bench(opts: BenchOptions, progress: Callable[[str], None] | None = None) -> BenchReport:
    """Run the protocol and return every row (see the module docstring)."""
    import torch

    from pipeline.engine.loading import resolve_device

    say = progress or (lambda message: log.info("%s", message))
    device = resolve_device(opts.device)
    on_gpu = device.type == "cuda"
    count = opts.sentences or (1024 if on_gpu else 48)
    precisions = opts.precisions or (("fp32", "fp16", "bf16", "int8") if on_gpu
                                     else ("fp32", "int8"))
    upstream_batches = opts.upstream_batches or ((4, 64, 256, 512) if on_gpu else (4, 16))
    texts = make_workload(count, opts.seed)
    steps = [min(forced_steps(t), opts.max_steps or 10**9) for t in texts]
    with _model_dir(opts) as (model_dir, weights_label):
        say(f"workload: {count} sentences, {sum(steps)} GPT steps "
            f"({sum(steps) / GPT_STEPS_PER_SECOND:.0f} s of audio); weights {weights_label}")
        ref, voice = _reference(model_dir, device, texts, steps, opts, say)
        rows: list[BenchRow] = []

        def ours(precision: str, row_opts: BenchOptions) -> None:
            rows.append(_run_ours(model_dir, device, precision, texts, steps, row_opts, ref, say))
            say(_describe(rows[-1]))

        # The rows the comparison rests on first (fp32, the first reduced precision, upstream),
        # so that a run cut short still answers the main question.
        for precision in precisions[:2]:
            ours(precision, opts)
        if opts.upstream:
            for batch in upstream_batches:
                rows.append(_run_upstream(model_dir, device, texts, steps, batch, voice,
                                          opts.upstream_seconds))
                say(_describe(rows[-1]))
        for precision in precisions[2:]:
            ours(precision, opts)
        scaling = opts.scaling_batches if opts.scaling_batches is not None else (
            (512,) if on_gpu else ())
        reduced = [p for p in precisions if p != "fp32"][:1]
        for entry in scaling if reduced else ():
            batch, slots = entry if isinstance(entry, tuple) else (entry, None)
            ours(reduced[0], replace(opts, batch=batch, slots=slots))
    name = torch.cuda.get_device_name(device) if on_gpu else platform.processor() or "cpu"
    return BenchReport(rows=tuple(rows), device=f"{device.type}: {name}", weights=weights_label,
                       date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       command=" ".join(sys.argv), ratios=_ratios(rows))


class _model_dir:
    """The benchmark's weights: the given directory, or synthetic ones in a temp dir."""

    def __init__(self, opts: BenchOptions) -> None:
        self.opts = opts
        self.tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> tuple[Path, str]:
        from pipeline.engine.weights import NOISE_WARNING, write_synthetic_weights

        if self.opts.synthetic:
            self.tmp = tempfile.TemporaryDirectory(prefix="tts-jobs-bench-")
            write_synthetic_weights(Path(self.tmp.name), self.opts.synthetic, self.opts.seed)
            log.warning(NOISE_WARNING)
            return Path(self.tmp.name), f"synthetic {self.opts.synthetic} (seed {self.opts.seed})"
        if self.opts.model_dir is None:
            raise ValueError("give model_dir or synthetic")
        return self.opts.model_dir, str(self.opts.model_dir)

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


def _requests(texts: Sequence[str], steps: Sequence[int], voice: str,
              seed: int) -> list[SynthesisRequest]:
    return [SynthesisRequest(text=t, voice=voice, seed=seed + i, max_new_tokens=n, min_new_tokens=n)
            for i, (t, n) in enumerate(zip(texts, steps))]


def _reference(model_dir: Path, device: Any, texts: list[str], steps: list[int],
               opts: BenchOptions, say: Callable[[str], None]) -> tuple[Any, str]:
    """fp32 reference data for the fidelity columns (one engine in memory at a time), and the
    voice every system reads with."""
    from pipeline.engine import EngineConfig, fidelity
    from pipeline.engine.loading import load_engine

    engine = load_engine(EngineConfig(model_dir=model_dir, device=str(device), precision="fp32"))
    voice = engine.sample_voice(opts.seed)
    picked = _spread(len(texts), opts.fidelity_sentences)
    requests = _requests([texts[i] for i in picked], [steps[i] for i in picked], voice, opts.seed)
    ref = fidelity.reference_data(engine, requests)
    say(f"fidelity reference: {len(requests)} sentences in fp32")
    del engine
    _release()
    return ref, voice


def _spread(total: int, count: int) -> list[int]:
    count = min(count, total)
    return sorted({round(i * (total - 1) / max(count - 1, 1)) for i in range(count)})


def _run_ours(model_dir: Path, device: Any, precision: str, texts: list[str], steps: list[int],
              opts: BenchOptions, ref: Any, say: Callable[[str], None]) -> BenchRow:
    import torch

    from pipeline.batching import PlanLimits, plan_batches
    from pipeline.engine import EngineConfig, fidelity, synthesize_with_oom_halving
    from pipeline.engine.loading import load_engine

    name, kv_cache = precision.split("-kv", 1) if "-kv" in precision else (precision, None)
    name, scheme = ("int8", "dynamic") if name == "int8-dyn" else (name, "weight_only")
    on_gpu = device.type == "cuda"
    started = time.perf_counter()
    engine = load_engine(EngineConfig(model_dir=model_dir, device=str(device), precision=name,
                                      kv_cache=kv_cache), int8_scheme=scheme)
    kv_int8 = engine.quantized_kv()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    engine.warm_up()
    voice = engine.sample_voice(opts.seed)
    requests = _requests(texts, steps, voice, opts.seed)
    graphs = engine.prepare_slots(opts.slots or opts.batch, max(engine.prompt_tokens_of(texts)),
                                  max(steps))
    # The protocol's one warm-up batch, shaped like the timed ones but of other sentences: the
    # memory allocator, pinned host buffers and FFT plans are then as a worker has them after
    # its first batch.
    warm_texts = make_workload(min(opts.batch, len(texts)), opts.seed + 1)
    warm_steps = [min(forced_steps(t), max(steps)) for t in warm_texts]
    synthesize_with_oom_halving(engine, _requests(warm_texts, warm_steps, voice, opts.seed + 1))
    warmup_s = time.perf_counter() - started
    cap = (int(torch.cuda.get_device_properties(device).total_memory * opts.memory_fraction)
           if on_gpu else 8 * 2**30)
    limits = PlanLimits(memory_cap_bytes=cap, max_rows=opts.batch)
    engine.slots = opts.slots
    engine.forget_prompts()  # the warm-up tokenized these texts; the timed run tokenizes them again
    _sync(device, reset=True)
    engine.clock.reset()
    with _host_profile(f"{precision}-{opts.batch}"):
        started = time.perf_counter()
        planned = [PlannedSentence(id=i, max_new_tokens=n, prompt_tokens=p)
                   for i, (n, p) in enumerate(zip(steps, engine.prompt_tokens_of(texts)))]
        batches = plan_batches(planned, limits, engine.memory_model())
        produced = 0
        for batch in batches:
            results = synthesize_with_oom_halving(engine,
                                                  [requests[i] for i in batch.sentence_ids])
            produced += sum(r.gpt_steps for r in results)
        _sync(device)
        wall = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if on_gpu else None
    if produced != sum(steps):
        raise RuntimeError(f"tts-jobs produced {produced} steps, expected {sum(steps)}")
    phases = engine.clock.totals()
    edges = engine.clock.edges()
    decode_steps, step_bytes = engine.clock.steps, engine.clock.step_bytes
    quality = fidelity.measure(engine, ref)
    del engine
    _release()
    audio = sum(steps) / GPT_STEPS_PER_SECOND
    return BenchRow(system="tts-jobs", precision=precision, batch=opts.batch, sentences=len(texts),
                    audio_s=audio, wall_s=wall, x_realtime=audio / wall, peak_gib=peak,
                    top1_agreement=quality.top1_agreement,
                    relative_logit_error=quality.relative_logit_error, snr_db=quality.snr_db,
                    load_s=load_s, warmup_s=warmup_s, batches=len(batches), slots=opts.slots,
                    gpt_s=phases["gpt_steps"], prefill_s=phases["prefill"],
                    waveform_s=phases["waveform"],
                    host_s=max(0.0, wall - sum(phases.values())),
                    idle_start_s=edges["idle_start"] if on_gpu else None,
                    idle_between_s=edges["idle_between"] if on_gpu else None,
                    tail_s=edges["tail"] if on_gpu else None,
                    after_s=max(0.0, wall - edges["busy_end"]) if on_gpu else None,
                    steps=decode_steps,
                    step_ms=1000 * phases["gpt_steps"] / max(decode_steps, 1),
                    bandwidth_tbs=(step_bytes / phases["gpt_steps"] / 1e12
                                   if phases["gpt_steps"] else None),
                    note=_join(_int8_note(name, scheme, on_gpu),
                               "KV cache int8" if kv_int8 else "",
                               f"{graphs} CUDA graphs" if graphs else ""))


@contextlib.contextmanager
def _host_profile(label: str) -> Iterator[None]:
    """With TTS_JOBS_BENCH_PROFILE=DIR, cProfile the timed region (where the host time goes);
    with TTS_JOBS_BENCH_TRACE=DIR, record it with torch.profiler instead (every kernel and CUDA
    call on a timeline, for ``scripts/gpu_trace_gaps.py``). Either slows the run it watches."""
    if os.environ.get("TTS_JOBS_BENCH_TRACE"):
        with _device_trace(Path(os.environ["TTS_JOBS_BENCH_TRACE"]) / f"trace-{label}.json.gz"):
            yield
        return
    folder = os.environ.get("TTS_JOBS_BENCH_PROFILE")
    if not folder:
        yield
        return
    import cProfile
    import pstats

    Path(folder).mkdir(parents=True, exist_ok=True)  # before the run, not after it
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        with open(Path(folder) / f"host-{label}.txt", "w") as out:
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)


@contextlib.contextmanager
def _device_trace(path: Path) -> Iterator[None]:
    from torch.profiler import ProfilerActivity, profile

    path.parent.mkdir(parents=True, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        yield
    prof.export_chrome_trace(str(path))


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _int8_note(precision: str, scheme: str, on_gpu: bool) -> str:
    if precision != "int8":
        return ""
    if not on_gpu:
        return "torch.ao dynamic int8"
    return "torchao int8 weight-only" if scheme == "weight_only" else "torchao int8 dynamic (W8A8)"


def _run_upstream(model_dir: Path, device: Any, texts: list[str], steps: list[int], batch: int,
                  voice: str, max_seconds: float) -> BenchRow:
    """Upstream ChatTTS 0.2.5 as its README runs a batch: fp32, one voice, one length per batch."""
    import torch

    from pipeline.engine.loading import _load_upstream
    from pipeline.engine.weights import locate_model

    started = time.perf_counter()
    chat = _load_upstream(locate_model(model_dir), device)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    _upstream_batch(chat, voice, texts[:2], steps[:2])
    warmup_s = time.perf_counter() - started
    _sync(device, reset=True)
    started = time.perf_counter()
    count = 0
    while count < len(texts) and time.perf_counter() - started < max_seconds:
        end = min(count + batch, len(texts))
        _upstream_batch(chat, voice, texts[count:end], steps[count:end])
        count = end
    _sync(device)
    wall = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    del chat
    _release()
    audio = sum(steps[:count]) / GPT_STEPS_PER_SECOND
    return BenchRow(system="upstream", precision="fp32", batch=batch, sentences=count,
                    audio_s=audio, wall_s=wall, x_realtime=audio / wall, peak_gib=peak,
                    load_s=load_s, warmup_s=warmup_s, batches=math.ceil(count / batch),
                    note="" if count == len(texts) else f"first {count} sentences (time cap)")


def _upstream_batch(chat: Any, speaker: str, texts: Sequence[str], steps: Sequence[int]) -> None:
    import ChatTTS

    longest = max(steps)
    params = ChatTTS.Chat.InferCodeParams(spk_emb=speaker, max_new_token=longest,
                                          min_new_token=longest, show_tqdm=False)
    wavs = chat.infer(list(texts), split_text=False, skip_refine_text=True,
                      params_infer_code=params)
    if len(wavs) != len(texts):
        raise RuntimeError(f"upstream returned {len(wavs)} waveforms for {len(texts)} texts")


def _sync(device: Any, reset: bool = False) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        if reset:
            torch.cuda.reset_peak_memory_stats(device)


def _release() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _ratios(rows: Sequence[BenchRow]) -> dict[str, float]:
    """Speed against upstream's best and batch-4 rows; fp16/fp32 peak memory at the same batch."""
    ours = [r for r in rows if r.system == "tts-jobs"]
    upstream = [r for r in rows if r.system == "upstream"]
    ratios: dict[str, float] = {}
    if ours and upstream:
        best_up = max(upstream, key=lambda r: r.x_realtime)
        for r in ours:
            ratios[f"tts-jobs {r.precision} batch {r.batch} / best upstream (batch {best_up.batch})"] = (
                r.x_realtime / best_up.x_realtime)
        best = max(ours, key=lambda r: r.x_realtime)
        for r in upstream:
            if r.batch == 4:
                ratios[f"best tts-jobs ({best.precision}, batch {best.batch}) / upstream batch 4"] = (
                    best.x_realtime / r.x_realtime)
    fp32 = {r.batch: r for r in ours if r.precision == "fp32" and r.peak_gib}
    for r in ours:
        if r.precision == "fp16" and r.batch in fp32 and r.peak_gib:
            ratios[f"tts-jobs peak memory fp16 / fp32 at batch {r.batch}"] = (
                r.peak_gib / (fp32[r.batch].peak_gib or 1.0))
    return ratios


# ------------------------------------------------------------------------------------ output
def _fmt(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)


def _describe(row: BenchRow) -> str:
    return (f"ROW {row.system} {row.precision} batch {row.batch} ({row.sentences} sentences, "
            f"{row.batches} batches): {row.x_realtime:.1f}x real time ({row.audio_s:.0f} s audio "
            f"in {row.wall_s:.1f} s), peak {_fmt(row.peak_gib, '.2f')} GiB, top-1 "
            f"{_fmt(row.top1_agreement, '.4f')}, SNR {_fmt(row.snr_db, '.1f')} dB, load "
            f"{_fmt(row.load_s, '.1f')} s, warm-up {_fmt(row.warmup_s, '.1f')} s {row.note}")


COPY_CEILING_TBS = 4.3  # H200 device-to-device copy, read + write (shared/PERFORMANCE.md)


def _batch_label(row: BenchRow) -> str:
    if row.slots and row.slots != row.batch:
        return f"{row.batch} ({row.slots} slots)"
    return str(row.batch)


def format_table(report: BenchReport) -> str:
    """A Markdown table of every row, the time breakdown of the tts-jobs rows, then the ratios."""
    header = ("| system | precision | batch | sentences | x real time | wall s | peak GiB "
              "| top-1 agree | logit rel err | SNR dB | load s | warm-up s | note |")
    lines = [f"Device: {report.device}; weights: {report.weights}; {report.date}", "",
             header, "|" + "---|" * 13]
    for r in report.rows:
        lines.append(
            f"| {r.system} | {r.precision} | {_batch_label(r)} | {r.sentences} | {r.x_realtime:.1f} "
            f"| {r.wall_s:.1f} | {_fmt(r.peak_gib, '.2f')} | {_fmt(r.top1_agreement, '.4f')} "
            f"| {_fmt(r.relative_logit_error, '.2e')} | {_fmt(r.snr_db, '.1f')} "
            f"| {_fmt(r.load_s, '.1f')} | {_fmt(r.warmup_s, '.1f')} | {r.note} |")
    lines += ["", "Where the tts-jobs time goes (GPU seconds from CUDA events; host = wall minus "
              "GPU phases, i.e. the GPU waiting on Python; on the GPU, where Decoder+Vocos overlaps "
              "the steps, the timeline says it better: GPU idle at the start and between phases, "
              "the tail of Decoder+Vocos after the last step, and the wall time after the GPU's "
              "last phase). Bandwidth: weights + attended KV cache "
              f"per step over the steps' GPU time, against the ~{COPY_CEILING_TBS} TB/s copy "
              "ceiling.", "",
              "| precision | batch | slots | wall s | GPT steps s | prefill s | Decoder+Vocos s "
              "| host s | idle start s | idle between s | tail s | after s | steps | ms/step "
              "| TB/s | % of ceiling |", "|" + "---|" * 16]
    for r in report.rows:
        if r.system != "tts-jobs" or r.gpt_s is None:
            continue
        share = r.bandwidth_tbs / COPY_CEILING_TBS * 100 if r.bandwidth_tbs else None
        lines.append(
            f"| {r.precision} | {r.batch} | {r.slots or r.batch} | {r.wall_s:.2f} | {r.gpt_s:.2f} "
            f"| {_fmt(r.prefill_s, '.2f')} | {_fmt(r.waveform_s, '.2f')} | {_fmt(r.host_s, '.2f')} "
            f"| {_fmt(r.idle_start_s, '.3f')} | {_fmt(r.idle_between_s, '.3f')} "
            f"| {_fmt(r.tail_s, '.3f')} | {_fmt(r.after_s, '.3f')} | {r.steps} | {_fmt(r.step_ms, '.2f')} | {_fmt(r.bandwidth_tbs, '.2f')} "
            f"| {_fmt(share, '.0f')} |")
    if report.ratios:
        lines.append("")
        lines += [f"- {name}: {value:.2f}" for name, value in report.ratios.items()]
    return "\n".join(lines)


def _batch_and_slots(text: str) -> int | tuple[int, int]:
    batch, _, slots = text.partition(":")
    return (int(batch), int(slots)) if slots else int(batch)


def _parse(argv: Sequence[str] | None) -> tuple[BenchOptions, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m pipeline.engine.bench",
                                     description="tts-jobs vs upstream ChatTTS throughput")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path)
    source.add_argument("--synthetic", choices=("tiny", "full"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", action="append",
                        help="fp32, fp16, bf16, int8 (CUDA: weight-only), int8-dyn (CUDA: W8A8); "
                             "a suffix -kvint8 / -kvmodel sets the KV cache (default: int8 on "
                             "the GPU's fp16/bf16 path); repeat or comma-separate")
    parser.add_argument("--sentences", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256,
                        help="most sentences in one planned batch (the pool the slots draw from)")
    parser.add_argument("--slots", type=int,
                        help="sentences decoded at once (continuous batching); default: the batch")
    parser.add_argument("--upstream-batch", action="append", type=int)
    parser.add_argument("--scaling-batch", action="append", type=_batch_and_slots,
                        help="extra tts-jobs rows (first reduced precision) at batch size N, or "
                             "N:S for a pool of N sentences through S slots; 0 = none")
    parser.add_argument("--upstream-seconds", type=float, default=75.0)
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    precisions = tuple(p for item in args.precision or [] for p in item.split(",") if p)
    opts = BenchOptions(model_dir=args.model_dir, synthetic=args.synthetic, device=args.device,
                        precisions=precisions, sentences=args.sentences, seed=args.seed,
                        batch=args.batch, slots=args.slots,
                        upstream_batches=tuple(args.upstream_batch) if args.upstream_batch else None,
                        upstream=not args.no_upstream, upstream_seconds=args.upstream_seconds,
                        scaling_batches=(tuple(b for b in args.scaling_batch if b != 0)
                                         if args.scaling_batch else None))
    return opts, args.json


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("ChatTTS", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    opts, json_path = _parse(argv)
    report = run_bench(opts, progress=lambda m: log.info("%s", m))
    if json_path:
        json_path.write_text(report.to_json())
    print(format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

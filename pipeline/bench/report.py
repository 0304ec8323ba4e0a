"""The benchmark's results: one row per system and setting, the ratios the comparison rests on, and
their Markdown table and JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

COPY_CEILING_TBS = 4.3  # H200 device-to-device copy, read + write (shared/PERFORMANCE.md): where none is measured


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
    warmup_s: float | None = None  # the engine's warm-up: a small batch, calibration, slots, graphs
    warm_batch_s: float | None = None  # the protocol's warm batch of the workload's size (not a start-up cost)
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
    ceiling_tbs: float = COPY_CEILING_TBS  # this device's copy bandwidth, measured at the start (GPU)

    def to_json(self) -> str:
        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        rows = [{k: clean(v) for k, v in asdict(r).items()} for r in self.rows]
        return json.dumps({"rows": rows, "device": self.device, "weights": self.weights,
                           "date": self.date, "command": self.command, "ratios": self.ratios,
                           "ceiling_tbs": self.ceiling_tbs},
                          indent=2, ensure_ascii=False)


def ratios(rows: Sequence[BenchRow]) -> dict[str, float]:
    """Speed against upstream's best and batch-4 rows; fp16/fp32 peak memory at the same batch."""
    ours = [r for r in rows if r.system == "tts-jobs"]
    upstream = [r for r in rows if r.system == "upstream" and r.x_realtime > 0]  # not out of memory
    found: dict[str, float] = {}
    if ours and upstream:
        best_up = max(upstream, key=lambda r: r.x_realtime)
        for r in ours:
            found[f"tts-jobs {r.precision} batch {r.batch} / best upstream (batch {best_up.batch})"] = (
                r.x_realtime / best_up.x_realtime)
        best = max(ours, key=lambda r: r.x_realtime)
        for r in upstream:
            if r.batch == 4:
                found[f"best tts-jobs ({best.precision}, batch {best.batch}) / upstream batch 4"] = (
                    best.x_realtime / r.x_realtime)
    fp32 = {r.batch: r for r in ours if r.precision == "fp32" and r.peak_gib}
    for r in ours:
        if r.precision == "fp16" and r.batch in fp32 and r.peak_gib:
            found[f"tts-jobs peak memory fp16 / fp32 at batch {r.batch}"] = (
                r.peak_gib / (fp32[r.batch].peak_gib or 1.0))
    return found


def describe(row: BenchRow) -> str:
    """One progress line for a finished row."""
    return (f"ROW {row.system} {row.precision} batch {row.batch} ({row.sentences} sentences, "
            f"{row.batches} batches): {row.x_realtime:.1f}x real time ({row.audio_s:.0f} s audio "
            f"in {row.wall_s:.1f} s), peak {_fmt(row.peak_gib, '.2f')} GiB, top-1 "
            f"{_fmt(row.top1_agreement, '.4f')}, SNR {_fmt(row.snr_db, '.1f')} dB, load "
            f"{_fmt(row.load_s, '.1f')} s, warm-up {_fmt(row.warmup_s, '.1f')} s (then a warm batch "
            f"{_fmt(row.warm_batch_s, '.1f')} s) {row.note}")


def format_table(report: BenchReport) -> str:
    """A Markdown table of every row, the time breakdown of the tts-jobs rows, then the ratios."""
    lines = [f"Device: {report.device}; weights: {report.weights}; {report.date}", ""]
    lines += _rows_table(report.rows) + [""] + _time_table(report.rows, report.ceiling_tbs)
    if report.ratios:
        lines.append("")
        lines += [f"- {name}: {value:.2f}" for name, value in report.ratios.items()]
    return "\n".join(lines)


def _rows_table(rows: Sequence[BenchRow]) -> list[str]:
    lines = ["| system | precision | batch | sentences | x real time | wall s | peak GiB "
             "| top-1 agree | logit rel err | SNR dB | load s | warm-up s | note |", "|" + "---|" * 13]
    for r in rows:
        lines.append(
            f"| {r.system} | {r.precision} | {_batch_label(r)} | {r.sentences} | {r.x_realtime:.1f} "
            f"| {r.wall_s:.1f} | {_fmt(r.peak_gib, '.2f')} | {_fmt(r.top1_agreement, '.4f')} "
            f"| {_fmt(r.relative_logit_error, '.2e')} | {_fmt(r.snr_db, '.1f')} "
            f"| {_fmt(r.load_s, '.1f')} | {_fmt(r.warmup_s, '.1f')} | {r.note} |")
    return lines


def _time_table(rows: Sequence[BenchRow], ceiling_tbs: float = COPY_CEILING_TBS) -> list[str]:
    lines = ["Where the tts-jobs time goes (GPU seconds from CUDA events; host = wall minus "
             "GPU phases, i.e. the GPU waiting on Python; on the GPU, where Decoder+Vocos overlaps "
             "the steps, the timeline says it better: GPU idle at the start and between phases, "
             "the tail of Decoder+Vocos after the last step, and the wall time after the GPU's "
             "last phase). Bandwidth: weights + attended KV cache "
             f"per step over the steps' GPU time, against this device's {ceiling_tbs:.2f} TB/s copy "
             "ceiling (a 1-GiB device-to-device copy, read and write; the H200's 4.3 on a CPU).", "",
             "| precision | batch | slots | wall s | GPT steps s | prefill s | Decoder+Vocos s "
             "| host s | idle start s | idle between s | tail s | after s | steps | ms/step "
             "| TB/s | % of ceiling |", "|" + "---|" * 16]
    for r in rows:
        if r.system != "tts-jobs" or r.gpt_s is None:
            continue
        share = r.bandwidth_tbs / ceiling_tbs * 100 if r.bandwidth_tbs else None
        lines.append(
            f"| {r.precision} | {r.batch} | {r.slots or r.batch} | {r.wall_s:.2f} | {r.gpt_s:.2f} "
            f"| {_fmt(r.prefill_s, '.2f')} | {_fmt(r.waveform_s, '.2f')} | {_fmt(r.host_s, '.2f')} "
            f"| {_fmt(r.idle_start_s, '.3f')} | {_fmt(r.idle_between_s, '.3f')} "
            f"| {_fmt(r.tail_s, '.3f')} | {_fmt(r.after_s, '.3f')} | {r.steps} "
            f"| {_fmt(r.step_ms, '.2f')} | {_fmt(r.bandwidth_tbs, '.2f')} | {_fmt(share, '.0f')} |")
    return lines


def _batch_label(row: BenchRow) -> str:
    if row.slots and row.slots != row.batch:
        return f"{row.batch} ({row.slots} slots)"
    return str(row.batch)


def _fmt(value: float | None, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)

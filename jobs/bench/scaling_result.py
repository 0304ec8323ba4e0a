"""What a phase of the workers' scaling measurement found, and the report of both phases: a
Markdown table, the speedup of two workers over one, and $OUT/scaling.json with the workers' logs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.bench.scaling_setup import Phase
from jobs.settings import Settings
from pipeline.bench.run_log import progress

TARGET_SPEEDUP = 1.9

@dataclass
class PhaseResult:
    phase: str
    synthesis_workers: int
    sentences: int = 0
    audio_seconds: float = 0.0
    startup_seconds: float | None = None  # workers started -> every synthesis worker ready
    to_synthesized_seconds: float | None = None  # first job recorded -> last batch finished (job table)
    to_done_seconds: float | None = None  # first job recorded -> last job finished (job table)
    submit_to_done_wall_seconds: float | None = None  # this tool's clock, submit command to both done
    synthesis_span_seconds: float | None = None  # first batch leased -> last batch finished
    batches: int = 0
    per_worker: dict[str, dict[str, Any]] = field(default_factory=dict)
    # seconds from the first job recorded: each job recorded, the first batch planned, the first lease
    start_milestones: dict[str, float | None] = field(default_factory=dict)
    # first job recorded -> each book finished, in job order: books read at different times finish
    # one after the other (storage/repo.next_queued_batch), the first assembled while the next is spoken
    books_done_seconds: list[float | None] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    cores_busy: dict[str, float] = field(default_factory=dict)  # the host's, "synthesizing" and "tail"

    @property
    def x_realtime(self) -> float | None:
        return self.audio_seconds / self.to_synthesized_seconds if self.to_synthesized_seconds else None

    @property
    def x_realtime_done(self) -> float | None:
        """Audio over submit -> every book done: what a user waiting for the audiobooks sees."""
        return self.audio_seconds / self.to_done_seconds if self.to_done_seconds else None

    @property
    def start_seconds(self) -> float | None:
        """Submit -> the first batch leased: ingest, planning, the first message (both phases pay it)."""
        if self.to_synthesized_seconds is None or self.synthesis_span_seconds is None:
            return None
        return round(self.to_synthesized_seconds - self.synthesis_span_seconds, 2)

    @property
    def tail_seconds(self) -> float | None:
        """The last batch -> every book done: the assembly left after synthesis (both phases pay it)."""
        if self.to_done_seconds is None or self.to_synthesized_seconds is None:
            return None
        return round(self.to_done_seconds - self.to_synthesized_seconds, 2)


# ------------------------------------------------------------------------------------ report


def speedups(results: list[PhaseResult]) -> dict[str, float | None]:
    by_name = {r.phase: r for r in results}
    one, two = by_name.get("one"), by_name.get("two")
    if one is None or two is None:
        return {}

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    return {"synthesized": ratio(one.to_synthesized_seconds, two.to_synthesized_seconds),
            "done": ratio(one.to_done_seconds, two.to_done_seconds),
            "synthesis_span": ratio(one.synthesis_span_seconds, two.synthesis_span_seconds)}


def markdown_report(results: list[PhaseResult], ratios: dict[str, float | None]) -> str:
    lines = [("| phase | synthesis workers | sentences | audio s | submit → synthesized s | submit → done s "
              "(each book) | start / tail s | × real time to synthesized / to done | batches per worker "
              "(leased s) | device s: prefill / steps / Decoder+Vocos (beside) / idle | write / record s "
              "(longest record) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        workers = sorted(r.per_worker.items())
        split = ", ".join(f"{name.split('@')[0]}: {w['batches']} ({w['busy_seconds']:.1f})" for name, w in workers)
        device = ", ".join(f"{name.split('@')[0]}: {w['prefill_seconds']:.1f} / {w['step_seconds']:.1f} / "
                           f"{w['waveform_seconds']:.1f} / {w['idle_seconds']:.1f}"
                           for name, w in workers if "step_seconds" in w) or "–"
        stages = ", ".join(f"{name.split('@')[0]}: {w['write_seconds']:.1f} / "
                           f"{w['record_seconds']:.1f} ({w['longest_record_seconds']:.1f})"
                           for name, w in workers if "write_seconds" in w) or "–"
        speed = " / ".join(f"{x:.0f}" if x else "–" for x in (r.x_realtime, r.x_realtime_done))
        lines.append(f"| {r.phase} | {r.synthesis_workers} | {r.sentences} | {r.audio_seconds:,.0f} "
                     f"| {r.to_synthesized_seconds} | {r.to_done_seconds} "
                     f"({' / '.join(str(b) for b in r.books_done_seconds)}) | {r.start_seconds} / {r.tail_seconds} "
                     f"| {speed} | {split} | {device} | {stages} |")
    if ratios:
        # the goal is two GPUs *finishing* the books at 1.9x the speed of one: submit -> done
        verdict = "meets" if (ratios["done"] or 0) >= TARGET_SPEEDUP else "is BELOW"
        lines += ["", (f"speedup two/one: submit → done **{ratios['done']}×** ({verdict} the "
                       f"{TARGET_SPEEDUP}× goal), submit → synthesized {ratios['synthesized']}×, first batch → "
                       f"last batch {ratios['synthesis_span']}×")]
    return "\n".join(lines)


def machine_facts() -> dict[str, str]:
    facts = {"host": socket.gethostname(), "python": sys.version.split()[0]}
    if shutil.which("nvidia-smi"):
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout
        facts["gpus"] = listing.strip()
    return facts


def save_outputs(report: dict[str, Any], phases: list[Phase]) -> None:
    """$OUT/scaling.json and the tail of every worker log under $OUT/logs (when $OUT is set)."""
    out = Settings.from_env().results_dir
    if out is None:
        return
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "scaling.json").write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    logs = Path(out) / "logs"
    logs.mkdir(exist_ok=True)
    for phase in phases:
        for worker in phase.workers:
            tail = worker.log_text()[-200_000:]
            (logs / f"{phase.name}-{worker.log_path.stem}.log").write_text(tail)
    progress(f"wrote {out}/scaling.json and {out}/logs")

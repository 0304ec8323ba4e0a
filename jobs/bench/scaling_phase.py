"""One phase of the workers' scaling measurement, from nothing to every audiobook done: workers
started and ready, the books submitted, the job table and the workers' logs read for the result."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.bench.scaling_result import PhaseResult
from jobs.bench.scaling_setup import (
    JobTable,
    Mode,
    Phase,
    phase_env,
    run_cli,
    seconds_between,
    seconds_left,
    synthesis_worker_name,
)
from pipeline.bench import host_speed
from pipeline.bench.host_cores import CoresBusy, named_trees
from pipeline.bench.kit import Tools
from pipeline.bench.processes import parent_pid, redis_running, start_worker, stop_process_groups
from pipeline.bench.run_log import RunFailed, progress
from storage.models import JobState

PHASES = (("one", 1), ("two", 2))  # name, synthesis workers (one GPU each)


def run_both_phases(mode: Mode, tools: Tools, scratch: Path, books: list[Path], weights: Path,
                    output_format: str, results: list[PhaseResult], phases: list[Phase],
                    chosen: Sequence[str] = ("one", "two")) -> None:
    """Phase "one" (one synthesis worker), then phase "two" (two), on one Redis; appends as it goes."""
    with redis_running(tools, scratch / "redis-data") as port:
        for database, (name, count) in enumerate(PHASES):
            if name not in chosen:
                continue
            redis_url = f"redis://127.0.0.1:{port}/{database}"  # one Redis database per phase
            folder = scratch / f"phase-{name}"
            phase = Phase(name=name, synthesis_workers=count, mode=mode, folder=folder,
                          env=phase_env(mode, tools, folder / "data", redis_url, weights))
            phases.append(phase)
            progress(f"phase {name}: {count} synthesis worker(s)")
            results.append(run_phase(phase, books, output_format))
            progress(f"phase {name}: submit → synthesized {results[-1].to_synthesized_seconds} s, "
                     f"→ done {results[-1].to_done_seconds} s")



def run_phase(phase: Phase, books: list[Path], output_format: str) -> PhaseResult:
    result = PhaseResult(phase=phase.name, synthesis_workers=phase.synthesis_workers)
    phase.folder.mkdir(parents=True, exist_ok=True)
    run_cli(["db", "upgrade"], phase.env)
    table = JobTable(phase.database_url)
    try:
        started = time.monotonic()
        start_phase_workers(phase)
        wait_until_ready(phase, table)
        result.startup_seconds = round(time.monotonic() - started, 1)
        progress(f"phase {phase.name}: every worker ready after {result.startup_seconds} s; "
                 f"{host_speed.quiet_disk()}; submitting")
        submitted = time.monotonic()
        cores = CoresBusy(submitted, named_trees({w.name: w.process.pid for w in phase.workers}))
        job_ids = run_cli(["submit", *map(str, books), "-f", output_format], phase.env).split()
        progress(f"phase {phase.name}: submitted jobs {', '.join(job_ids)}")
        wait_until_done(phase, table, len(books))
        result.submit_to_done_wall_seconds = round(time.monotonic() - submitted, 2)
        cores.stop()
        record_measurements(result, phase, table)
        record_cores_busy(result, cores)
    finally:
        table.close()
        stop_process_groups([w.process for w in phase.workers])
        progress(f"phase {phase.name}: workers stopped")
    return result


def record_cores_busy(result: PhaseResult, cores: CoresBusy) -> None:
    """The host's busy cores while the books were spoken and in the tail after the last batch
    (whether the assembly that ends a shelf waited on the cores or on something else)."""
    stages = [("synthesizing", 0.0)]
    if result.to_synthesized_seconds is not None:
        stages.append(("tail", result.to_synthesized_seconds))
    wall = result.submit_to_done_wall_seconds or 0.0
    result.cores_busy = {name: round(busy, 1) for name, busy in cores.between_stages(stages, wall)}
    # which worker the busy cores went to (each with its pool, helpers and ffmpeg processes)
    for stage, workers in cores.groups_between_stages(stages, wall).items():
        result.cores_busy.update({f"{stage}, {worker}": round(busy, 1) for worker, busy in workers.items()})
    progress(f"phase {result.phase}: cores busy (of {os.cpu_count()}): "
             + "; ".join(f"{name} {busy}" for name, busy in result.cores_busy.items()))


def start_phase_workers(phase: Phase) -> None:
    host = socket.gethostname()
    phase.workers.append(start_worker(f"cpu@{host}", ["worker", "--cpu", "--concurrency", "2",
                                                      "--name", f"cpu@{host}"],
                                      phase.env, phase.folder / "worker-cpu.log"))
    for index in range(phase.synthesis_workers):
        name = synthesis_worker_name(phase.mode, index)
        phase.workers.append(start_worker(name, phase.mode.synthesis_worker_args(index), phase.env,
                                          phase.folder / f"worker-synth{index}.log"))


def wait_until_ready(phase: Phase, table: JobTable) -> None:
    """Until every worker's pool is up and every synthesis worker has registered with the planner."""
    synthesis_names = {synthesis_worker_name(phase.mode, i) for i in range(phase.synthesis_workers)}
    last_report = 0.0
    while True:
        check_workers_alive(phase)
        registered = table.registered_workers() & synthesis_names
        waiting = [w.name for w in phase.workers if not w.is_ready()]
        if not waiting and registered == synthesis_names:
            return
        if time.monotonic() - last_report > 15:
            last_report = time.monotonic()
            progress(f"phase {phase.name}: waiting for {', '.join(waiting) or 'registration'} "
                     f"(registered: {', '.join(sorted(registered)) or 'none'})")
        if seconds_left(phase.mode) <= 0:
            raise RunFailed(f"workers not ready within the budget: {', '.join(waiting)}")
        time.sleep(1)


def check_workers_alive(phase: Phase) -> None:
    for worker in phase.workers:
        if worker.process.poll() is not None:
            raise RunFailed(f"{worker.name} exited with {worker.process.returncode}; its log ends:\n"
                            + worker.log_text()[-4000:])


def wait_until_done(phase: Phase, table: JobTable, books: int) -> None:
    """Until every job is done; a failed or cancelled job ends the run with its error."""
    last_report = 0.0
    while True:
        check_workers_alive(phase)
        jobs = table.jobs()
        broken = [j for j in jobs if j["state"] in (JobState.FAILED.value, JobState.CANCELLED.value)]
        if broken:
            raise RunFailed("; ".join(f"job {j['id']} {j['state']}: {j['error']}" for j in broken))
        if len(jobs) == books and all(j["state"] == JobState.DONE.value for j in jobs):
            progress(f"phase {phase.name}: every book done")
            return
        if time.monotonic() - last_report > 10:
            last_report = time.monotonic()
            total, done, audio = table.sentences()
            states = ", ".join(f"{j['id']}:{j['state']}" for j in jobs)
            progress(f"phase {phase.name}: {done}/{total} sentences, {audio:,.0f} s of audio; jobs {states}")
        if seconds_left(phase.mode) <= 0:
            raise RunFailed(f"phase {phase.name} not done within the budget ({phase.mode.budget_s:.0f} s)")
        time.sleep(0.5)


def record_measurements(result: PhaseResult, phase: Phase, table: JobTable) -> None:
    jobs, batches = table.jobs(), table.batches()
    result.sentences, _, result.audio_seconds = table.sentences()
    result.audio_seconds = round(result.audio_seconds, 1)
    submitted = min(j["created_at"] for j in jobs)
    last_batch = max((b["finished_at"] for b in batches if b["finished_at"]), default=None)
    first_lease = min((b["leased_at"] for b in batches if b["leased_at"]), default=None)
    result.to_synthesized_seconds = seconds_between(submitted, last_batch)
    result.to_done_seconds = seconds_between(submitted, max(j["finished_at"] for j in jobs))
    result.books_done_seconds = [seconds_between(submitted, j["finished_at"]) for j in jobs]
    result.synthesis_span_seconds = seconds_between(first_lease, last_batch)
    result.batches = len(batches)
    result.start_milestones = {
        **{f"job {j['id']} recorded": seconds_between(submitted, j["created_at"]) for j in jobs},
        "first batch planned": seconds_between(submitted, min(b["created_at"] for b in batches)),
        "first batch leased": seconds_between(submitted, first_lease),
    }
    progress(f"phase {phase.name}: start: {result.start_milestones}")
    result.per_worker = batches_per_worker(phase, batches)
    for worker in phase.workers:
        if worker.name in result.per_worker:
            result.per_worker[worker.name].update(batch_seconds_from_log(worker.log_text()))
    result.outputs = [o for j in jobs for o in j["outputs"]]


BATCH_LOG_LINE = re.compile(r"batch=\d+: .*synthesized in ([\d.]+) s .*written in ([\d.]+) s, "
                            r"recorded in ([\d.]+) s")
DEVICE_TIME_LINE = re.compile(r"device time: prefill ([\d.]+) s, \d+ decode steps ([\d.]+) s, "
                              r"Decoder\+Vocos ([\d.]+) s .*idle ([\d.]+) s before the first and ([\d.]+) s between")


def batch_seconds_from_log(log_text: str) -> dict[str, float]:
    """A synthesis worker's time per batch stage, from the line it logs after each batch, and
    its device time, from the line it logs after each task (a stream of batches). In a stream a
    batch's "synthesized in" runs from its claim to its last waveform and overlaps the batches
    beside it, so the device time says where the GPU's time went; writing and recording run
    beside the GPU, and a slow one shows in "longest record"."""
    stages = [tuple(map(float, m.groups())) for m in BATCH_LOG_LINE.finditer(log_text)]
    if not stages:
        return {}
    _, written, recorded = zip(*stages)
    device = [tuple(map(float, m.groups())) for m in DEVICE_TIME_LINE.finditer(log_text)]
    prefill, steps, waveform, idle_start, idle_between = (sum(column) for column in zip(*device)) if device \
        else (0.0,) * 5
    return {"prefill_seconds": round(prefill, 2), "step_seconds": round(steps, 2),
            "waveform_seconds": round(waveform, 2), "idle_seconds": round(idle_start + idle_between, 2),
            "write_seconds": round(sum(written), 2), "record_seconds": round(sum(recorded), 2),
            "longest_record_seconds": max(recorded)}


def batches_per_worker(phase: Phase, batches: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Batches, sentences and busy seconds per synthesis worker (a lease names the pool child's pid)."""
    names = {w.process.pid: w.name for w in phase.workers}
    split: dict[str, dict[str, Any]] = {}
    for batch in batches:
        pid = (batch["leased_by"] or "").rpartition(":")[2]
        name = names.get(parent_pid(int(pid)) if pid.isdigit() else None, batch["leased_by"] or "unleased")
        entry = split.setdefault(name, {"batches": 0, "sentences": 0, "busy_seconds": 0.0, "retried": 0})
        entry["batches"] += 1
        entry["sentences"] += batch["size"]
        entry["busy_seconds"] = round(entry["busy_seconds"]
                                      + (seconds_between(batch["leased_at"], batch["finished_at"]) or 0.0), 2)
        entry["retried"] += int(batch["attempts"] > 1)
    return split

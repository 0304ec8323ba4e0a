"""Two GPU workers against one, through the real Celery path: do two books finish ~2x faster?

    python3 scripts/gpu_workers_scaling.py                      # on a machine with 2 GPUs
    python3 scripts/gpu_workers_scaling.py --sentences-per-book 2500 --max-batch 512
    python scripts/gpu_workers_scaling.py --cpu-smoke           # the same flow on CPU, tiny weights
    python3 scripts/gpu_workers_scaling.py --phases one         # one GPU: phase one alone (start, tail, device time)
    python3 scripts/gpu_workers_scaling.py --phases one --shelf 3 9 22   # a shelf: three EPUBs of 3, 9, 22 h

With ``--shelf HOURS...`` the books are EPUB 3 files of about those hours of audio each (different
titles, authors and sentences, 20 chapters each; the longest over 20 h is the issue's shelf), not
the two equal Markdown books; the table's "× real time to done" is the shelf's audio over submit
-> every M4B done.

Each phase starts from nothing: a fresh data directory and SQLite database (the embedded default),
one `tts-jobs worker --cpu` (ingest, plan, assemble) and N synthesis workers (`tts-jobs worker
--gpu I`, each pinned to its GPU). Once every synthesis worker has loaded its model and registered
with the planner, the same two books go in through `tts-jobs submit`, and the phase ends when both
audiobooks are done. Phase "one" has one synthesis worker (GPU 0), phase "two" has two (GPU 0 and 1).
The weights are SYNTHETIC (random values at the upstream sizes, so the audio is noise), written once
with `tts-jobs model synthetic`; fp16 on the GPUs.

Measured per phase, from the job table: submit -> every sentence synthesized (the part that more
GPUs speed up), submit -> both audiobooks done (adds the assembly of the last book, which is CPU
work), the audio produced, and each synthesis worker's batches and busy time. The speedup is phase
one's time over phase two's; the goal is >= 1.9. The default books (~5,300 sentences each) make about
a dozen batches at the default pool of 1024 sentences, and at most ~108,000 s of audio (random
weights stop at their length cap or earlier), i.e. roughly 40-100 s for one H200.

redis-server (own process on a free port) and ffmpeg come from a kit folder when there is one
(--kit, default .kit, git-ignored and built by hand; its README says how): the Debian packages of
redis-server and its libraries, unpacked into a scratch folder here, and a static ffmpeg as
bin/ffmpeg.xz. Without a kit both are taken from PATH. The Python packages must already be
importable (e.g. PYTHONPATH=/tmp/site:$PWD after `pip install --target /tmp/site`).

Prints a Markdown table; with $OUT set, also writes $OUT/scaling.json and the workers' logs under
$OUT/logs. Every process the script starts is stopped at the end, on failure too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import case, create_engine, func, select  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from gpu_harness import (  # noqa: E402
    STARTED,
    TTS_JOBS,
    RunFailed,
    Tools,
    WorkerProcess,
    parent_pid,
    prepare_tools,
    progress,
    redis_running,
    start_worker,
    stop_process_groups,
    write_books,
)

from storage.models import Batch, Job, JobState, Sentence, SentenceState, Worker  # noqa: E402

TARGET_SPEEDUP = 1.9


# ------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Mode:
    """What differs between the GPU measurement and the CPU smoke test."""

    name: str
    weights: str  # `tts-jobs model synthetic --size`
    device: str  # TTS_JOBS_DEVICE
    precision: str | None  # TTS_JOBS_PRECISION (None: the project's default)
    sentences_per_book: int
    chapters_per_book: int
    budget_s: float  # the whole run stops waiting after this long
    max_batch: int | None = None  # TTS_JOBS_MAX_BATCH (None: the project's default, 1024 on a GPU)
    extra_env: tuple[tuple[str, str], ...] = ()  # for every tts-jobs process

    def synthesis_worker_args(self, index: int) -> list[str]:
        """`tts-jobs worker` arguments of synthesis worker ``index`` (pinned to GPU ``index`` on CUDA)."""
        if self.device == "cuda":
            return ["worker", "--gpu", str(index), "--name", synthesis_worker_name(self, index)]
        return ["worker", "--queues", "synth", "--name", synthesis_worker_name(self, index)]


GPU_MODE = Mode(name="gpu", weights="full", device="cuda", precision="fp16",
                sentences_per_book=5000, chapters_per_book=20, budget_s=510)
# One torch thread per process: two synthesis workers on a small CPU must not fight over its cores.
CPU_SMOKE_MODE = Mode(name="cpu-smoke", weights="tiny", device="cpu", precision=None,
                      sentences_per_book=30, chapters_per_book=2, budget_s=1500,
                      extra_env=(("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1")))


def synthesis_worker_name(mode: Mode, index: int) -> str:
    prefix = "gpu" if mode.device == "cuda" else "synth"
    return f"{prefix}{index}@{socket.gethostname()}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny weights on CPU, a few dozen sentences: tests the flow, measures nothing")
    parser.add_argument("--sentences-per-book", type=int, help="default 5000 (GPU) / 30 (smoke)")
    parser.add_argument("--chapters-per-book", type=int, help="default 20 (GPU) / 2 (smoke)")
    parser.add_argument("--shelf", type=float, nargs="+", metavar="HOURS",
                        help="EPUB 3 books of about these hours of audio each, instead of the two equal books")
    parser.add_argument("--max-batch", type=int,
                        help="TTS_JOBS_MAX_BATCH for every worker (default: the project's own)")
    parser.add_argument("--format", default="m4b", help="output format of both books (default m4b)")
    parser.add_argument("--budget", type=float, help="seconds before the run gives up (default 510 / 1500)")
    parser.add_argument("--kit", type=Path, default=REPO / ".kit",
                        help="where redis-server and ffmpeg come from (default .kit)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (data, logs, books)")
    parser.add_argument("--phases", nargs="+", choices=[name for name, _ in PHASES], default=[n for n, _ in PHASES],
                        help="run only these phases (phase one alone needs one GPU: its start, tail "
                             "and device time on a one-GPU machine)")
    return parser.parse_args()


def chosen_mode(args: argparse.Namespace) -> Mode:
    mode = CPU_SMOKE_MODE if args.cpu_smoke else GPU_MODE
    overrides = {"sentences_per_book": args.sentences_per_book, "chapters_per_book": args.chapters_per_book,
                 "budget_s": args.budget, "max_batch": args.max_batch}
    return replace(mode, **{k: v for k, v in overrides.items() if v is not None})


def seconds_left(mode: Mode) -> float:
    return mode.budget_s - (time.monotonic() - STARTED)


# ------------------------------------------------------------------------------------ the job table


class JobTable:
    """Read-only queries on one phase's database (plain connections: no write lock is taken)."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)

    def registered_workers(self) -> set[str]:
        with self.engine.connect() as connection:
            return set(connection.scalars(select(Worker.name)))

    def jobs(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(Job.id, Job.state, Job.error, Job.created_at, Job.finished_at,
                                             Job.outputs).order_by(Job.id))
            return [dict(row._mapping) for row in rows]

    def sentences(self) -> tuple[int, int, float]:
        """(sentences, sentences done, seconds of audio)."""
        with self.engine.connect() as connection:
            is_done = case((Sentence.state == SentenceState.DONE.value, 1), else_=0)
            total, done, audio = connection.execute(select(
                func.count(Sentence.id), func.sum(is_done), func.sum(Sentence.audio_seconds))).one()
        return int(total or 0), int(done or 0), float(audio or 0.0)

    def batches(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(Batch.id, Batch.state, Batch.size, Batch.leased_by, Batch.created_at,
                                             Batch.leased_at, Batch.finished_at, Batch.attempts))
            return [dict(row._mapping) for row in rows]

    def close(self) -> None:
        self.engine.dispose()


def seconds_between(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 2)


# ------------------------------------------------------------------------------------ one phase


@dataclass
class PhaseResult:
    phase: str
    synthesis_workers: int
    sentences: int = 0
    audio_seconds: float = 0.0
    startup_seconds: float | None = None  # workers started -> every synthesis worker ready
    to_synthesized_seconds: float | None = None  # first job recorded -> last batch finished (job table)
    to_done_seconds: float | None = None  # first job recorded -> last job finished (job table)
    submit_to_done_wall_seconds: float | None = None  # this script's clock, submit command to both done
    synthesis_span_seconds: float | None = None  # first batch leased -> last batch finished
    batches: int = 0
    per_worker: dict[str, dict[str, Any]] = field(default_factory=dict)
    # seconds from the first job recorded: each job recorded, the first batch planned, the first lease
    start_milestones: dict[str, float | None] = field(default_factory=dict)
    # first job recorded -> each book finished, in job order: books read at different times finish
    # one after the other (storage/repo.next_queued_batch), the first assembled while the next is spoken
    books_done_seconds: list[float | None] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

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


@dataclass
class Phase:
    """Everything one phase needs: its workers, environment and folder."""

    name: str
    synthesis_workers: int
    mode: Mode
    folder: Path
    env: dict[str, str]
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def database_url(self) -> str:
        return self.env["TTS_JOBS_DATABASE_URL"]


def phase_env(mode: Mode, tools: Tools, data_dir: Path, redis_url: str, weights: Path) -> dict[str, str]:
    env = {**os.environ, "TTS_JOBS_DATA_DIR": str(data_dir),
           "TTS_JOBS_DATABASE_URL": f"sqlite:///{data_dir / 'tts-jobs.db'}", "TTS_JOBS_BROKER_URL": redis_url,
           "TTS_JOBS_MODEL_DIR": str(weights), "TTS_JOBS_DEVICE": mode.device, "PYTHONUNBUFFERED": "1",
           # each phase's workers compile their Triton kernels from nothing (in their warm-up), so
           # both phases start equally cold whatever the user's cache holds
           "TRITON_CACHE_DIR": str(data_dir / "triton-cache"),
           **dict(mode.extra_env)}
    if mode.precision:
        env["TTS_JOBS_PRECISION"] = mode.precision
    if mode.max_batch:
        env["TTS_JOBS_MAX_BATCH"] = str(mode.max_batch)
    if tools.path_prefix:
        env["PATH"] = os.pathsep.join([tools.path_prefix, env.get("PATH", "")])
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(TTS_JOBS + args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RunFailed(f"tts-jobs {' '.join(args)} exited with {done.returncode}: "
                        f"{done.stderr.strip()[-2000:]}")
    return done.stdout


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
        progress(f"phase {phase.name}: every worker ready after {result.startup_seconds} s; submitting")
        submitted = time.monotonic()
        job_ids = run_cli(["submit", *map(str, books), "-f", output_format], phase.env).split()
        progress(f"phase {phase.name}: submitted jobs {', '.join(job_ids)}")
        wait_until_done(phase, table, len(books))
        result.submit_to_done_wall_seconds = round(time.monotonic() - submitted, 2)
        record_measurements(result, phase, table)
    finally:
        table.close()
        stop_process_groups([w.process for w in phase.workers])
        progress(f"phase {phase.name}: workers stopped")
    return result


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
    lines = ["| phase | synthesis workers | sentences | audio s | submit → synthesized s | submit → done s "
             "(each book) | start / tail s | × real time to synthesized / to done | batches per worker (leased s) | device s: prefill / steps / Decoder+Vocos (beside) "
             "/ idle | write / record s (longest record) |",
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
        lines += ["", f"speedup two/one: submit → done **{ratios['done']}×** ({verdict} the "
                      f"{TARGET_SPEEDUP}× goal), submit → synthesized {ratios['synthesized']}×, first batch → "
                      f"last batch {ratios['synthesis_span']}×"]
    return "\n".join(lines)


def machine_facts() -> dict[str, str]:
    facts = {"host": socket.gethostname(), "python": sys.version.split()[0]}
    if shutil.which("nvidia-smi"):
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        facts["gpus"] = listing.strip()
    return facts


def save_outputs(report: dict[str, Any], phases: list[Phase]) -> None:
    """$OUT/scaling.json and the tail of every worker log under $OUT/logs (when $OUT is set)."""
    out = os.environ.get("OUT")
    if not out:
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


# ------------------------------------------------------------------------------------ main


def exit_on_sigterm(*_: object) -> None:
    """Turn SIGTERM into SystemExit so that every `finally` stops its processes; ignore a second one."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(143)


def main() -> int:
    args = parse_args()
    mode = chosen_mode(args)
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    scratch = Path(tempfile.mkdtemp(prefix="tts-scaling-"))
    shelf = f"EPUBs of {', '.join(f'{h:g}' for h in args.shelf)} h" if args.shelf else \
        f"{mode.sentences_per_book} sentences x 2 books"
    progress(f"mode {mode.name}: {shelf}, {mode.weights} weights on "
             f"{mode.device}, budget {mode.budget_s:.0f} s; scratch {scratch}")
    report: dict[str, Any] = {"mode": asdict(mode), "machine": machine_facts(), "command": " ".join(sys.argv),
                              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    results: list[PhaseResult] = []  # filled phase by phase: a failure keeps what was measured
    phases: list[Phase] = []
    code = 1
    try:
        tools = prepare_tools(args.kit, scratch / "tools")
        books, cap_seconds = write_books(scratch / "books", mode.sentences_per_book, mode.chapters_per_book,
                                          args.shelf or ())
        progress(f"books: {', '.join(b.name for b in books)}; at most {cap_seconds:,.0f} s of audio in all")
        weights = scratch / "weights"
        run_cli(["model", "synthetic", str(weights), "--size", mode.weights], dict(os.environ))
        progress(f"synthetic {mode.weights} weights in {weights}")
        run_both_phases(mode, tools, scratch, books, weights, args.format, results, phases, args.phases)
        code = 0
    except RunFailed as failure:
        report["error"] = str(failure)
        progress(f"FAILED: {failure}")
    finally:
        report["phases"] = [asdict(r) | {"x_realtime": r.x_realtime, "x_realtime_done": r.x_realtime_done,
                                          "start_seconds": r.start_seconds,
                                          "tail_seconds": r.tail_seconds} for r in results]
        report["speedup"], report["target_speedup"] = speedups(results), TARGET_SPEEDUP
        if results:
            print("\n" + markdown_report(results, report["speedup"]) + "\n", flush=True)
        save_outputs(report, phases)
        if args.keep:
            progress(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return code


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


if __name__ == "__main__":
    sys.exit(main())

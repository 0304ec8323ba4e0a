"""Soak run: many small books, two real workers, one of them SIGKILLed and restarted at random.

Used by `tests/test_soak.py` (a short run in CI) and by `scripts/soak` (the full run, by command):

    scripts/soak                        # 20 books, at most 20 minutes
    scripts/soak --books 40 --minutes 30 --seed 7

Every book is read by the real ChatTTS code on TINY SYNTHETIC weights (random values: the audio is
noise, never speech). Two `tts-jobs worker` processes share the real PostgreSQL job table and Redis
broker. The "victim" worker (parent and pool child: its whole process group) is SIGKILLed at random
moments and started again; the "steady" worker is never touched, so the run always makes progress.
Every setting but the batch size is the default (lease, visibility timeout, attempts cap). Work the
victim held comes back through the sweeper of whichever worker looks first (jobs/cluster/reconcile.py): the
victim's batches, ingest or assembly are held by a pid that is dead on this host, so they go back
to the queue at once, and a commit whose message the kill cut off is sent again after 30 s.

At the end every book is checked as a user would: state done, every sentence done exactly once
(one WAV per sentence), the audiobook's chapters and duration, no temporary files left anywhere,
no batch or job left in a running state.

This module also holds the checks the server-restart tests share (`book_problems`).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.books import write_epub
from tests.e2e_helpers import (
    TTS_JOBS,
    assert_duration_matches_sentences_plus_pauses,
    cli,
    ffprobe_chapters,
)

# Temporary names the project writes before an atomic rename (pipeline/temp_files.py): artifacts
# (`.x~host~pid~token.part`), sentence WAVs (`…tmp`), exported audiobooks (`…partial`). None may
# survive a finished job.
TEMP_PATTERNS = ("*.part", "*.tmp", "*.partial")
ACTIVE_JOB_STATES = ("queued", "ingesting", "synthesizing", "assembling")
FINAL_JOB_STATES = ("done", "failed", "cancelled")
REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- checks shared with other tests


def leftover_temp_files(*roots: Path) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        if root.exists():
            for pattern in TEMP_PATTERNS:
                found.extend(root.rglob(pattern))
    return sorted(set(found))


def expected_wav_names(status: dict[str, Any]) -> set[str]:
    """`CCCC/SSSSS.wav` for every sentence of every chapter (chapter and sentence indices from 0)."""
    return {f"{c['index']:04d}/{s:05d}.wav" for c in status["chapters"] for s in range(c["sentences"])}


def stored_wav_names(data_dir: Path, job_id: int) -> list[str]:
    audio = data_dir / "jobs" / str(job_id) / "audio"
    return sorted(p.relative_to(audio).as_posix() for p in audio.rglob("*.wav")) if audio.exists() else []


def book_problems(status: dict[str, Any], data_dir: Path, chapter_titles: Sequence[str]) -> list[str]:
    """Everything wrong with a job that should be a finished audiobook (empty: nothing).

    ``status`` is `tts-jobs status JOB --json` (with its per-chapter detail).
    """
    job = status["id"]
    problems: list[str] = []
    if status["state"] != "done":
        return [f"job {job}: {status['state']} ({status.get('error')})"]
    if not status["sentences_total"] or status["sentences_done"] != status["sentences_total"]:
        problems.append(f"job {job}: {status['sentences_done']}/{status['sentences_total']} sentences done")
    if status["sentences_failed"]:
        problems.append(f"job {job}: {status['sentences_failed']} sentences failed")
    if [c["title"] for c in status["chapters"]] != list(chapter_titles):
        problems.append(f"job {job}: chapters {[c['title'] for c in status['chapters']]}")
    wavs = stored_wav_names(data_dir, job)
    expected = expected_wav_names(status)
    if len(wavs) != len(set(wavs)) or set(wavs) != expected or len(wavs) != status["sentences_total"]:
        problems.append(f"job {job}: sentence WAVs {wavs}, expected one per sentence {sorted(expected)}")
    outputs = [Path(p) for p in status["outputs"]]
    if len(outputs) != 1 or not outputs[0].is_file() or outputs[0].suffix != ".m4b":
        return problems + [f"job {job}: outputs {status['outputs']}"]
    titles = [c["tags"].get("title") for c in ffprobe_chapters(outputs[0])]
    if titles != list(chapter_titles):
        problems.append(f"job {job}: M4B chapter marks {titles}, expected {list(chapter_titles)}")
    try:
        assert_duration_matches_sentences_plus_pauses(outputs[0], status, data_dir)
    except AssertionError as exc:
        problems.append(f"job {job}: duration (actual, expected) = {exc}")
    leftovers = leftover_temp_files(data_dir / "jobs" / str(job), outputs[0].parent)
    if leftovers:
        problems.append(f"job {job}: temporary files left: {[str(p) for p in leftovers]}")
    return problems


def stuck_rows(database_url: str) -> list[str]:
    """Batches still `running` and jobs still in an active state (nothing may stay there)."""
    from sqlalchemy import select

    from storage.db import make_engine
    from storage.models import Batch, Job

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            batches = conn.execute(select(Batch.id, Batch.leased_by).where(Batch.state == "running")).all()
            jobs = conn.execute(select(Job.id, Job.state).where(Job.state.in_(ACTIVE_JOB_STATES))).all()
    finally:
        engine.dispose()
    return ([f"batch {b} still running (leased by {who})" for b, who in batches]
            + [f"job {j} still {s}" for j, s in jobs])


# ---------------------------------------------------------------- worker processes


def start_worker(env: dict[str, str], name: str, log_path: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    """A `tts-jobs worker` in its own session (so its whole process group can be killed at once)."""
    log = open(log_path, "a")  # noqa: SIM115 - the process owns it until it exits
    log.write(f"\n===== soak: starting worker {name} at {time.strftime('%H:%M:%S')} =====\n")
    log.flush()
    return subprocess.Popen(TTS_JOBS + ["worker", "--loglevel", "INFO", "--name", f"{name}@%h"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True)


def kill_group(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """SIGKILL a worker we started and everything in its process group (its pool child)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def stop_worker(process: subprocess.Popen, timeout: float = 60) -> None:  # type: ignore[type-arg]
    """Warm shutdown (SIGTERM to the parent), then SIGKILL of the group for anything left over."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    kill_group(process)


def group_pids(pgid: int) -> list[int]:
    """Live processes of a process group (the worker's parent and its pool child)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def batches_held_by(database_url: str, pids: Sequence[int]) -> list[int]:
    """Running batches leased by any of these processes (lease holders are named `host:pid`)."""
    import socket

    from sqlalchemy import select

    from storage.db import make_engine
    from storage.models import Batch

    holders = [f"{socket.gethostname()}:{pid}" for pid in pids]
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.scalars(select(Batch.id).where(Batch.state == "running",
                                                            Batch.leased_by.in_(holders))))
    finally:
        engine.dispose()


# ---------------------------------------------------------------- the soak


@dataclass(frozen=True)
class SoakConfig:
    books: int = 20
    minutes: float = 20.0  # the whole run, submission to the last book (a hard bound)
    seed: int = 0
    chapters_per_book: int = 2
    # The victim is killed this long (uniform) after its model is loaded, i.e. while it works; if it
    # holds no batch then, the kill waits up to `aim_seconds` more for one, to hit work in flight.
    kill_after: tuple[float, float] = (5.0, 40.0)
    aim_seconds: float = 10.0
    start_timeout: float = 180.0  # a victim not ready by then is killed anyway


@dataclass
class Kill:
    at_seconds: float
    batches_held: list[int]


@dataclass
class SoakReport:
    job_ids: list[int]
    kills: list[Kill] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    states: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        held = sum(1 for k in self.kills if k.batches_held)
        hits = ", ".join(f"{k.at_seconds:.0f}s {k.batches_held}" for k in self.kills if k.batches_held)
        lines = [(f"soak: {len(self.job_ids)} books in {self.seconds:.0f} s; victim SIGKILLed "
                  f"{len(self.kills)} times ({held} while holding a batch: {hits})"),
                 f"soak: final states {dict(sorted(self.states.items()))}"]
        lines += [f"soak: PROBLEM {p}" for p in self.problems] or ["soak: every book verified"]
        return "\n".join(lines)


class _KillSchedule:
    """When to kill the victim: a random time after its model is ready (so it is working)."""

    READY_LINE = "model ready on"

    def __init__(self, config: SoakConfig, rng: random.Random, victim_log: Path) -> None:
        self._config, self._rng, self._log = config, rng, victim_log
        self.restarted()

    def restarted(self) -> None:
        self._ready_before = self._ready_count()
        self._started = time.monotonic()
        self._kill_at: float | None = None

    def _ready_count(self) -> int:
        return self._log.read_text(errors="replace").count(self.READY_LINE) if self._log.exists() else 0

    def due(self, now: float, victim_holds_a_batch: bool) -> bool:
        if self._kill_at is None:
            if self._ready_count() > self._ready_before:
                self._kill_at = now + self._rng.uniform(*self._config.kill_after)
            elif now - self._started > self._config.start_timeout:
                return True
            return False
        if now < self._kill_at:
            return False
        return victim_holds_a_batch or now >= self._kill_at + self._config.aim_seconds


def book_chapters(number: int, chapters: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """A tiny book: short chapters of one or two short sentences (each sentence ~2 s of audio)."""
    words = ["Ann", "reads", "the", "map", "Bob", "sings", "a", "song", "rain", "falls", "now"]
    out = []
    for c in range(chapters):
        sentences = [" ".join(rng.sample(words, 3)).capitalize() + "."
                     for _ in range(rng.choice((1, 1, 2)))]
        out.append((f"Book {number} part {c + 1}", [" ".join(sentences)]))
    return out


def soak_env(env: dict[str, str]) -> dict[str, str]:
    """The worker settings a soak runs with: the defaults, but small batches (4 sentences), which
    make many units of work, so that kills land on work in flight."""
    return {**{k: v for k, v in env.items() if k not in ("TTS_JOBS_LEASE_SECONDS",
                                                         "TTS_JOBS_VISIBILITY_TIMEOUT", "TTS_JOBS_MAX_ATTEMPTS")},
            "TTS_JOBS_MAX_BATCH": "4"}


def run_soak(env: dict[str, str], work_dir: Path, config: SoakConfig,
             log: Any = print) -> SoakReport:
    """Submit ``config.books`` books at once to two workers, kill one of them at random until done."""
    from jobs.runtime import open_runtime
    from jobs.settings import Settings
    from jobs.status import job_statuses

    rng = random.Random(config.seed)
    settings = Settings.from_env(env)
    work_dir.mkdir(parents=True, exist_ok=True)
    books = []
    for n in range(1, config.books + 1):
        chapters = book_chapters(n, config.chapters_per_book, rng)
        books.append((write_epub(work_dir / f"book{n:03d}.epub", f"Soak Book {n}", chapters), chapters))
    started = time.monotonic()
    deadline = started + config.minutes * 60
    victim_log = work_dir / "victim.log"
    victim = start_worker(env, "victim", victim_log)
    schedule = _KillSchedule(config, rng, victim_log)  # before the victim can be ready: it counts its ready lines
    steady = start_worker(env, "steady", work_dir / "steady.log")
    report = SoakReport(job_ids=[])
    try:
        submitted = cli(["submit", *[str(path) for path, _ in books]], env, timeout=300)
        if submitted.returncode != 0:
            report.problems.append(f"submit failed: {submitted.stderr[-2000:]}")
            return report
        report.job_ids = [int(line) for line in submitted.stdout.split()]
        log(f"soak: submitted {len(report.job_ids)} books: jobs {report.job_ids}")
        rt = open_runtime(settings, upgrade_schema=False)
        while True:
            states = {s.id: s.state for s in job_statuses(rt) if s.id in report.job_ids}
            report.states = states
            if all(states.get(j) in FINAL_JOB_STATES for j in report.job_ids):
                break
            now = time.monotonic()
            if now > deadline:
                report.problems += [f"job {s.id} not finished after {config.minutes} min: {s.state}"
                                    f"{f' ({s.error})' if s.error else ''}"
                                    for s in job_statuses(rt) if s.id in report.job_ids
                                    and s.state not in FINAL_JOB_STATES]
                break
            held = batches_held_by(settings.database_url, group_pids(victim.pid))
            if schedule.due(now, bool(held)):
                kill_group(victim)
                report.kills.append(Kill(at_seconds=now - started, batches_held=held))
                log(f"soak: {now - started:5.0f} s: SIGKILLed the victim worker"
                    f"{f' holding batch(es) {held}' if held else ' (holding no batch)'}; "
                    f"{sum(1 for s in states.values() if s == 'done')}/{len(report.job_ids)} books done")
                schedule.restarted()
                victim = start_worker(env, "victim", victim_log)
            if steady.poll() is not None:
                report.problems.append(f"the steady worker exited ({steady.returncode})")
                break
            time.sleep(1.0)
    finally:
        stop_worker(victim)
        stop_worker(steady)
        report.seconds = time.monotonic() - started
    if report.problems:
        return report
    for job_id, (_, chapters) in zip(report.job_ids, books):
        status = job_statuses(rt, job_id)[0].to_json()
        report.problems += book_problems(status, settings.data_dir, [title for title, _ in chapters])
    report.problems += stuck_rows(settings.database_url)
    return report


# ---------------------------------------------------------------- `scripts/soak`


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=20.0, help="hard bound on the whole run")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 10_000)
    parser.add_argument("--kill-after", type=float, nargs=2, default=(5.0, 40.0), metavar=("MIN", "MAX"),
                        help="seconds the victim worker works (after loading its model) before a kill (uniform)")
    parser.add_argument("--pg-admin", default=os.environ.get("TTS_JOBS_TEST_PG_ADMIN",
                                                             "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--redis-url", default=None,
                        help="a Redis database this run may flush (default: one no test session is using)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, audio)")
    args = parser.parse_args(argv)

    import shutil
    import tempfile
    import uuid

    import psycopg
    import redis

    from jobs.settings import Settings
    from pipeline.engine.weights import write_synthetic_weights
    from tests import conftest

    # Importing conftest claims a Redis database no test session uses (see _claim_redis_database).
    redis_url = args.redis_url or conftest.REDIS_TEST_URL
    work = Path(tempfile.mkdtemp(prefix="tts-jobs-soak-"))
    database = f"tts_jobs_soak_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.pg_admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    broker = redis.Redis.from_url(redis_url)

    def flush() -> None:  # and keep our claim on the database
        broker.flushdb()
        broker.set(conftest._SESSION_LOCK_KEY, os.getpid(), ex=6 * 3600)

    flush()
    try:
        print("soak: writing tiny SYNTHETIC weights (random values: the audiobooks are NOISE, not speech)")
        model = write_synthetic_weights(work / "model", size="tiny", seed=0).root
        settings = Settings.from_env({
            "TTS_JOBS_DATA_DIR": str(work / "data"),
            "TTS_JOBS_DATABASE_URL": f"{args.pg_admin.rsplit('/', 1)[0]}/{database}",
            "TTS_JOBS_BROKER_URL": redis_url, "TTS_JOBS_MODEL_DIR": str(model),
            "TTS_JOBS_DEVICE": "cpu", "TTS_JOBS_PRECISION": "fp32"})
        env = soak_env(conftest.env_for(settings))
        upgraded = cli(["db", "upgrade"], env, timeout=300)
        if upgraded.returncode != 0:
            print(upgraded.stderr, file=sys.stderr)
            return 1
        config = SoakConfig(books=args.books, minutes=args.minutes, seed=args.seed,
                            kill_after=tuple(args.kill_after))  # type: ignore[arg-type]
        print(f"soak: seed {args.seed}, work folder {work}")
        report = run_soak(env, work / "run", config)
        print(report.summary())
        return 0 if report.ok else 1
    finally:
        flush()
        with psycopg.connect(args.pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if args.keep:
            print(f"soak: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

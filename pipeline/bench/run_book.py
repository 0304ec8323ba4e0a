"""Time `tts-jobs run BOOK` (the embedded default) on a lent GPU: command start -> audiobook written.

Writes synthetic full-size weights (noise, never speech) and an EPUB 3 of about ``--hours`` of
audio (the engine benchmark's mixed Chinese/English sentences, ``--chapters`` chapters), then runs
`tts-jobs run` as a user would, in a fresh data directory each time, ``--runs`` times in a row on
one Triton cache and the first run's memory calibration (the first run compiles the kernels and
calibrates, as a user's first run does; later runs find both kept, as every later run of a user's
does). Each stage line of the run's piped progress is time-stamped from the command's start, and
the moment the first sentence's WAV appears is a stage too, so the table says where the time went.

    python -m pipeline.bench run-book --hours 6 --runs 2 [--memory-gib 8] [--format m4b]
    python -m pipeline.bench run-book --cpu-smoke     # tiny weights, a few sentences: the flow only
    python -m pipeline.bench run-book --hours 24 --chapters 60 --runs 2 --spy 6   # py-spy: run 2's start

Old and new code, or a setting on and off, side by side on one host: ``--variant LABEL=TREE``
(``:VAR=VALUE,...`` for its environment), given once for each; run N of every variant comes before
run N+1 of any (a host that slows down mid-call slows all of them alike), on one book and weights:

    python -m pipeline.bench run-book --hours 24 --chapters 60 --runs 2 --variant new=. \
        --variant old=.old --variant eager-prefill=.:TTS_JOBS_PREFILL_GRAPHS=0

Needs the kit (docs/gpu-kit.md): ffmpeg from .kit/bin when it is not on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jobs.settings import Settings, child_environment
from pipeline.bench import host_speed
from pipeline.bench.host_cores import CoresBusy, parts_of
from pipeline.bench.kit import kit_ffmpeg
from pipeline.bench.shelf import write_epub_book

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench run-book") -> int:
    args = parse_args(argv, prog)
    scratch = Path(tempfile.mkdtemp(prefix="tts-run-book-"))
    out = Settings.from_env().results_dir  # the lent machine's OUT
    env = child_environment(PYTHONUNBUFFERED="1", TRITON_CACHE_DIR=str(scratch / "triton"))
    if args.cpu_smoke:
        env["TTS_JOBS_DEVICE"] = "cpu"
    ffmpeg = None if shutil.which("ffmpeg") else kit_ffmpeg(args.kit / "bin", scratch / "bin")
    if ffmpeg is not None:
        env["PATH"] = f"{ffmpeg}:{env['PATH']}"
    weights = scratch / "weights"
    tts_jobs(["model", "synthetic", str(weights), "--size", args.size], env)
    env["TTS_JOBS_MODEL_DIR"] = str(weights)
    book, cap = write_book(scratch / "book.epub", args.hours, args.chapters)
    print(f"book: {book.stat().st_size / 1e6:.1f} MB EPUB, at most {cap / 3600:.1f} h of audio", flush=True)
    print(host_speed.measured_apart(), flush=True)  # hosts of one kind differ ~3x in host-bound phases
    rows = []
    for number in range(1, args.runs + 1):
        for k, (label, tree, extra) in enumerate(args.variants):
            data, first = scratch / f"data-{k}-{number}", scratch / f"data-{k}-1"
            if (first / "cache").is_dir():  # what a machine that ran once keeps (calibration)
                shutil.copytree(first / "cache", data / "cache")
            run_env = dict(env, **extra, TTS_JOBS_DATA_DIR=str(data))
            command = ["run", str(book), "--out", str(scratch / f"out-{k}-{number}"), "-f", args.format]
            if args.memory_gib:
                command += ["--memory-gib", str(args.memory_gib)]
            if args.verbose:
                command.append("-v")
            if label:
                print(f"variant {label}: {tree} {' '.join(f'{n}={v}' for n, v in extra.items())}", flush=True)
            print(host_speed.quiet_disk(), flush=True)
            spy = ((out or Path(tempfile.gettempdir())) / f"spy-{label or 'run'}-{number}.txt"
                   if args.spy and number > 1 else None)
            rows.append({"variant": label, **timed_run(command, run_env, number, tree, spy, args.spy)})
    print("\n| variant | run | wall s | audio s | x real time | stages (s from the command's start) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        stages = "; ".join(f"{name} {at:.1f}" for name, at in row["stages"])
        speed = f"failed ({row['failed']})" if "failed" in row else f"{row['x_realtime']:.0f}"
        print(f"| {row['variant'] or '-'} | {row['run']} | {row['wall_s']:.1f} | {row['audio_s']:.0f} "
              f"| {speed} | {stages} |")
    ((out or scratch) / "run_book.json").write_text(json.dumps(rows, indent=2))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if any("failed" in row for row in rows) else 0


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--chapters", type=int, default=30)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--format", default="m4b")
    parser.add_argument("--memory-gib", type=float)
    parser.add_argument("--verbose", action="store_true", help="the runs' debug logs (ChatTTS's load steps too)")
    parser.add_argument("--size", choices=("full", "tiny"), default="full",
                        help="synthetic weights' size (tiny: to try the tool on a CPU)")
    parser.add_argument("--kit", type=Path, default=ROOT / ".kit")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="the source tree whose `tts-jobs run` is timed (default: this one; an older "
                             "commit's, say, to compare old and new code in one call)")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=TREE[:VAR=VALUE,...]",
                        help="a tree and environment timed beside the others, their runs taking turns "
                             "(given once per variant; instead of --code)")
    parser.add_argument("--spy", type=float, default=0.0, metavar="SECONDS",
                        help="py-spy (on PATH) samples every run after the first for its first SECONDS, every "
                             "thread of the run and its children, waiting ones too: raw stacks in OUT")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny weights on the CPU, a few dozen sentences, one run: the flow, no measure")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.size, args.hours, args.chapters, args.runs = "tiny", 0.02, 2, 1
    if args.spy and not shutil.which("py-spy"):
        parser.error("--spy needs py-spy on PATH (the kit's: /tmp/site/bin after scripts/gpu_steps)")
    try:
        args.variants = [variant(v) for v in args.variant] or [("", args.code.resolve(), {})]
    except ValueError as exc:
        parser.error(str(exc))
    return args


def variant(text: str) -> tuple[str, Path, dict[str, str]]:
    """``LABEL=TREE[:VAR=VALUE,...]`` -> (label, the tree's path, its environment)."""
    label, _, rest = text.partition("=")
    tree, _, assignments = rest.partition(":")
    extra = dict(a.split("=", 1) for a in assignments.split(",") if a)
    if not label or not tree or not all(extra) or not Path(tree).is_dir():
        raise ValueError(f"--variant {text!r}: give LABEL=TREE[:VAR=VALUE,...] with TREE a source tree")
    return label, Path(tree).resolve(), extra


def write_book(path: Path, hours: float, chapters: int) -> tuple[Path, float]:
    return write_epub_book(path, "A Six Hour Book", "Run Book", hours, chapters)


def tts_jobs(args: list[str], env: dict[str, str], tree: Path = ROOT) -> str:
    done = subprocess.run([sys.executable, "-m", "jobs.cli", *args], env=env, capture_output=True,
                          text=True, check=True, cwd=tree)
    return done.stdout


def stage_of(line: str) -> str | None:
    """The stage a piped progress line names ("... tts_jobs: book.epub: speaking 2/18 ..." ->
    "speaking"), or None for another line."""
    if "tts_jobs: " not in line:
        return None
    message = line.split("tts_jobs: ", 1)[1].split(": ", 1)[-1]
    words = []
    for word in message.split():
        if any(c.isdigit() for c in word):
            break
        words.append(word)
    return " ".join(words[:3]) or None


def timed_run(command: list[str], env: dict[str, str], number: int, tree: Path = ROOT,
              spy: Path | None = None, spy_seconds: float = 0.0) -> dict:
    """One `tts-jobs run`: its wall time, and when each stage began (from its piped progress);
    with ``spy``, py-spy's samples of its first ``spy_seconds`` there (``--spy``)."""
    started = time.monotonic()
    first_sentence = FirstSentence(Path(env["TTS_JOBS_DATA_DIR"]), started)
    process = subprocess.Popen([sys.executable, "-m", "jobs.cli", *command], env=env, text=True, cwd=tree,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if spy is not None:  # attached once the interpreter is up: what the first seconds wait on
        time.sleep(0.05)
        subprocess.Popen(["py-spy", "record", "--pid", str(process.pid), "--subprocesses", "--threads", "--idle",
                          "--rate", "200", "--duration", str(round(spy_seconds)), "--format", "raw",
                          "-o", str(spy)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cores = CoresBusy(started, parts_of(process.pid, run_part))
    stages: list[tuple[str, float]] = []
    assert process.stderr is not None
    for line in process.stderr:
        at = time.monotonic() - started
        stage = stage_of(line)
        if stage and (not stages or stages[-1][0] != stage):
            stages.append((stage, at))
        print(f"[{at:7.2f}] {line.rstrip()}", flush=True)
    stdout = process.stdout.read() if process.stdout else ""
    code = process.wait()
    wall = time.monotonic() - started
    cores.stop()
    if first_sentence.at is not None:
        stages = sorted([*stages, ("first sentence written", first_sentence.at)], key=lambda stage: stage[1])
    busy = cores.between_stages(stages, wall)
    parts = cores.groups_between_stages(stages, wall)
    if code != 0:  # said in the table; the other variants' runs go on
        print(f"run {number} failed ({code})", flush=True)
        return {"run": number, "wall_s": wall, "audio_s": 0.0, "x_realtime": 0.0, "stages": stages,
                "cores_busy": busy, "cores_by_part": parts, "failed": code}
    status = json.loads(tts_jobs(["status", "--json"], env, tree))
    job = status[0] if isinstance(status, list) else status["jobs"][0]
    audio = float((job.get("report") or {}).get("total_seconds") or job.get("audio_seconds") or 0.0)
    print(f"run {number}: {wall:.1f} s, {audio:.0f} s of audio, {audio / wall:.0f}x real time; {stdout.strip()}",
          flush=True)
    print(f"run {number}: cores busy (of {os.cpu_count()}), by stage: "
          + "; ".join(f"{name} {cores_busy:.1f}" for name, cores_busy in busy), flush=True)
    for stage, by_part in parts.items():  # the run's process and its children, by what they are
        print(f"run {number}: {stage}: cores by part: "
              + "; ".join(f"{part} {cores_busy:.1f}" for part, cores_busy in by_part.items()), flush=True)
    return {"run": number, "wall_s": wall, "audio_s": audio, "x_realtime": audio / wall, "stages": stages,
            "cores_busy": busy, "cores_by_part": parts}



def run_part(command: str) -> str:
    """What a child of `tts-jobs run` is, from its command line."""
    for marker, name in (("assemble_ahead_child", "assembling ahead"), ("jobs.plan", "planning the rest"),
                         ("stitch_helpers", "measure and stitch helpers"), ("ffmpeg", "ffmpeg")):
        if marker in command:
            return name
    started = re.findall(r"import ([\w.]+) as", command)  # a child started as `python -c "import M as child; ..."`
    return started[-1] if started else command.split(" ", 1)[0].rsplit("/", 1)[-1] or "other"


class FirstSentence:
    """When a run's first sentence WAV appears in its data directory (seconds from ``started``):
    a batch is recorded only once its last sentence is, so the progress lines cannot say it."""

    def __init__(self, data_dir: Path, started: float) -> None:
        self.at: float | None = None
        self._data_dir, self._started = data_dir, started
        threading.Thread(target=self._watch, name="first-sentence", daemon=True).start()

    def _watch(self) -> None:
        deadline = self._started + 600
        while self.at is None and time.monotonic() < deadline:
            if next(self._data_dir.glob("jobs/*/audio/*/*.wav"), None) is not None:
                self.at = time.monotonic() - self._started
            time.sleep(0.02)

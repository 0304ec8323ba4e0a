"""Two GPU workers against one, through the real Celery path: do two books finish ~2x faster?

    python -m pipeline.bench workers-scaling                    # on a machine with 2 GPUs
    python -m pipeline.bench workers-scaling --sentences-per-book 2500 --max-batch 512
    python -m pipeline.bench workers-scaling --cpu-smoke        # the same flow on CPU, tiny weights
    python -m pipeline.bench workers-scaling --phases one       # one GPU: phase one alone
    python -m pipeline.bench workers-scaling --phases one --shelf 3 9 22   # EPUBs of 3, 9, 22 h

``pipeline.bench`` starts this module (``python -m jobs.bench.workers_scaling``) as its child: it
reads the job table, which ``pipeline/`` may not.

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
$OUT/logs. Every process the tool starts is stopped at the end, on failure too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from jobs.bench.scaling_phase import PHASES, run_both_phases
from jobs.bench.scaling_result import (
    TARGET_SPEEDUP,
    PhaseResult,
    machine_facts,
    markdown_report,
    save_outputs,
    speedups,
)
from jobs.bench.scaling_setup import CPU_SMOKE_MODE, GPU_MODE, Mode, Phase, run_cli
from jobs.settings import process_environment
from pipeline.bench import host_speed
from pipeline.bench.kit import prepare_tools
from pipeline.bench.processes import REPO
from pipeline.bench.run_log import RunFailed, progress
from pipeline.bench.shelf import write_books


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    prog = argparse.ArgumentParser(add_help=False)
    prog.add_argument("--prog", default="python -m pipeline.bench workers-scaling")
    known, rest = prog.parse_known_args(argv)
    parser = argparse.ArgumentParser(prog=known.prog, description=__doc__,
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
    return parser.parse_args(rest)


def chosen_mode(args: argparse.Namespace) -> Mode:
    mode = CPU_SMOKE_MODE if args.cpu_smoke else GPU_MODE
    overrides = {"sentences_per_book": args.sentences_per_book, "chapters_per_book": args.chapters_per_book,
                 "budget_s": args.budget, "max_batch": args.max_batch}
    return replace(mode, **{k: v for k, v in overrides.items() if v is not None})


def exit_on_sigterm(*_: object) -> None:
    """Turn SIGTERM into SystemExit so that every `finally` stops its processes; ignore a second one."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(143)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
        run_cli(["model", "synthetic", str(weights), "--size", mode.weights], process_environment())
        progress(f"synthetic {mode.weights} weights in {weights}")
        progress(host_speed.measured_apart())  # hosts of one kind differ ~3x in host-bound phases
        run_both_phases(mode, tools, scratch, books, weights, args.format, results, phases, args.phases)
        code = 0
    except RunFailed as failure:
        report["error"] = str(failure)
        progress(f"FAILED: {failure}")
    finally:
        finish(report, results, phases)
        if args.keep:
            progress(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return code


def finish(report: dict[str, Any], results: list[PhaseResult], phases: list[Phase]) -> None:
    """The table of what was measured (a failed run's phases too) and $OUT's files."""
    report["phases"] = [asdict(r) | {"x_realtime": r.x_realtime, "x_realtime_done": r.x_realtime_done,
                                      "start_seconds": r.start_seconds,
                                      "tail_seconds": r.tail_seconds} for r in results]
    report["speedup"], report["target_speedup"] = speedups(results), TARGET_SPEEDUP
    if results:
        print("\n" + markdown_report(results, report["speedup"]) + "\n", flush=True)
    save_outputs(report, phases)


if __name__ == "__main__":
    sys.exit(main())

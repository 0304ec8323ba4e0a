"""Commands that take books: `run`, `submit`, `bulk`, `inspect`. Each parses, calls a use case
of jobs/ and reports; `jobs/cli.py` registers them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import bulk
from jobs.cli_output import Progress, duration, print_inspection
from jobs.embedded import run_book
from jobs.inspect_book import inspect_book
from jobs.options import JobOptions, parse_formats
from jobs.runtime import open_engine, open_runtime
from jobs.settings import Settings
from jobs.status import JobStatus, job_statuses
from jobs.submit import check_options, submit_book, validate_book
from jobs.voices import DEFAULT_VOICE
from pipeline.errors import TtsJobsError

log = logging.getLogger("tts_jobs")

EXIT_FAILED = 1  # a book failed or was cancelled
EXIT_BAD_INPUT = 2  # a book or an option could not be used

BookArg = Annotated[Path, typer.Argument(help="The book: .epub, .txt, .md or .html.")]
FormatOpt = Annotated[Optional[list[str]], typer.Option(
    "--format", "-f", help="Output format(s): m4b, mp3, ogg, flac, wav (repeat or comma-separate).")]
VoiceOpt = Annotated[str, typer.Option("--voice", help="Voice name (see `tts-jobs voice list`).")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="Folder for the finished audiobook.")]
ModelDirOpt = Annotated[Optional[Path], typer.Option(
    "--model-dir", help="ChatTTS weights (upstream layout); default TTS_JOBS_MODEL_DIR, else the HF cache.")]
RefineOpt = Annotated[bool, typer.Option("--refine", help="ChatTTS's refine pass: pauses, breaths.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def fail(message: str, code: int) -> None:
    """One line on stderr, then exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise SystemExit(code)


# ---------------------------------------------------------------- run / submit


def run(
    book: BookArg,
    out: OutOpt = None,
    fmt: FormatOpt = None,
    model_dir: ModelDirOpt = None,
    voice: VoiceOpt = DEFAULT_VOICE,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda, cuda:N")] = None,
    precision: Annotated[Optional[str], typer.Option(help="auto, fp32, fp16, bf16, int8")] = None,
    refine: RefineOpt = False,
) -> None:
    """Convert one book here and now (embedded default: SQLite, no servers). Prints the output path."""
    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision)
    rt = open_runtime(settings)
    options = JobOptions(formats=parse_formats(fmt), out_dir=out.resolve() if out else None, voice=voice,
                         refine=refine)
    validate_book(book)  # fail fast, before the model loads
    check_options(rt, options)
    engine = open_engine(settings)
    with Progress(f"Reading {book.name}") as on_progress:
        job_id = run_book(rt, book, options, engine, on_progress)
    status = job_statuses(rt, job_id)[0]
    if status.state != "done":
        fail(f"job {job_id} {status.state}: {status.error}", EXIT_FAILED)
    for path in status.outputs:
        typer.echo(path)


def submit(
    books: Annotated[list[Path], typer.Argument(help="One or more books.")],
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    fmt: FormatOpt = None,
    voice: VoiceOpt = DEFAULT_VOICE,
    out: OutOpt = None,
    refine: RefineOpt = False,
) -> None:
    """Record books as jobs and queue them for the workers. Prints one job id per book."""
    from jobs import tasks

    rt = open_runtime(Settings.from_env())
    options = JobOptions(formats=parse_formats(fmt), out_dir=out.resolve() if out else None,
                         voice=voice, priority=priority, refine=refine)
    tasks.connect_to_broker()  # now, not between recording the first job and queueing it
    failed = False
    for book in books:
        try:
            job_id = submit_book(rt, book, options)
        except TtsJobsError as exc:
            typer.echo(f"error: {exc}", err=True)
            failed = True
            continue
        tasks.send_ingest(job_id)
        typer.echo(job_id)
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- inspect


def inspect(
    book: Annotated[Path, typer.Argument(help="The book to read.")],
    as_json: JsonOpt = False,
    sentences: Annotated[bool, typer.Option("--sentences", help="List each chapter's sentences.")] = False,
) -> None:
    """Show what would be read: metadata, chapters, sentences, estimated duration, warnings."""
    report = inspect_book(book, with_sentences=sentences)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print_inspection(report, sentences)


# ---------------------------------------------------------------- bulk


def bulk_command(
    inbox: Annotated[Path, typer.Argument(help="Folder of books (.epub, .txt, .md, .html).")],
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Audiobooks land in OUT/<title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks); "
                      "workers must see the same path.")] = None,
    fmt: FormatOpt = None,
    voice: VoiceOpt = DEFAULT_VOICE,
    priority: Annotated[int, typer.Option(help="Higher runs first; a negative value lets interactive "
                                               "submissions overtake the night's books.")] = 0,
    recursive: Annotated[bool, typer.Option("--recursive", help="Also read sub-folders.")] = False,
    min_age: Annotated[float, typer.Option(
        help="Leave files changed less than this many seconds ago (still being copied) for the next run."
    )] = bulk.DEFAULT_MIN_AGE_SECONDS,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Wait until every submitted book is finished; exit 1 if any failed.")] = False,
    poll: Annotated[float, typer.Option(help="Seconds between progress checks with --wait.")] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Submit every book in INBOX not submitted before (known by content, so renamed copies are skipped).

    Exit code: 1 if a book failed (with --wait), else 2 if a file could not be read, else 0.
    """
    from jobs import tasks

    settings = Settings.from_env()
    rt = open_runtime(settings)
    out_dir = out.absolute() if out else bulk.default_out_dir(settings.data_dir)
    options = bulk.BulkOptions(out_dir=out_dir, recursive=recursive, min_age_seconds=min_age,
                               job=JobOptions(formats=parse_formats(fmt), voice=voice, priority=priority))
    for report in bulk.write_pending_reports(rt, out_dir):
        log.info("bulk: wrote report %s", report)
    outcomes = bulk.submit_inbox(rt, inbox, options, enqueue=tasks.send_ingest)
    if not as_json:
        _print_outcomes(outcomes)
    submitted = [o.job_id for o in outcomes if o.outcome == bulk.Outcome.SUBMITTED and o.job_id is not None]
    results = []
    if wait and submitted:
        results = bulk.wait_for_jobs(rt, submitted, on_progress=lambda p: log.info("bulk: %s", p.line()),
                                     on_final=lambda s: bulk.write_report(rt, s.id), poll_seconds=poll)
    if as_json:
        payload = {"inbox": str(inbox), "out": str(out_dir), "books": [o.to_json() for o in outcomes],
                   "results": [bulk.book_report(s) for s in results]}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    elif wait:
        _print_summary(outcomes, results)
    raise typer.Exit(_bulk_exit_code(outcomes, results))


def _print_outcomes(outcomes: list[bulk.BookOutcome]) -> None:
    for o in outcomes:
        if o.outcome == bulk.Outcome.SUBMITTED:
            typer.echo(f"submitted   {o.path.name} -> job {o.job_id} ({o.book_dir})")
        else:
            typer.echo(f"{o.outcome.value:<11} {o.path.name}: {o.reason}")
    if not outcomes:
        typer.echo("no books found")


def _print_summary(outcomes: list[bulk.BookOutcome], results: list[JobStatus]) -> None:
    for s in results:
        detail = ", ".join(s.outputs) if s.state == "done" else (s.error or "")
        seconds = s.report.get("total_seconds", s.audio_seconds)  # with pauses, once assembled
        typer.echo(f"{s.state:<11} job {s.id} {s.title} ({duration(seconds)}): {detail}")
    count = {kind: sum(o.outcome == kind for o in outcomes) for kind in bulk.Outcome}
    done = sum(s.state == "done" for s in results)
    typer.echo(f"summary: {count[bulk.Outcome.SUBMITTED]} submitted, {count[bulk.Outcome.SKIPPED]} skipped, "
               f"{count[bulk.Outcome.UNREADABLE]} unreadable; {done} done, {len(results) - done} failed")


def _bulk_exit_code(outcomes: list[bulk.BookOutcome], results: list[JobStatus]) -> int:
    if any(s.state != "done" for s in results):
        return EXIT_FAILED
    if any(o.outcome == bulk.Outcome.UNREADABLE for o in outcomes):
        return EXIT_BAD_INPUT
    return 0

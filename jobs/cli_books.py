"""Commands that take books: `run`, `submit`, `bulk`, `inspect`. Each parses, calls a use case
of jobs/ and reports; `jobs/cli.py` registers them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import bulk
from jobs.book_folders import default_out_root
from jobs.cli_output import Progress, duration, print_inspection
from jobs.broker import check_broker, queue_or_withdraw
from jobs.embedded import RunStopped, plan_run, run_book
from jobs.inspect_book import inspect_book
from jobs.options import JobOptions, parse_formats
from jobs.runtime import Runtime, open_engine, open_runtime
from jobs.settings import Settings
from jobs.status import JobStatus, job_statuses
from jobs.submit import check_options, submit_book, withdraw_job
from jobs.voices import DEFAULT_VOICE
from pipeline.errors import BookError

log = logging.getLogger("tts_jobs")

EXIT_FAILED = 1  # a book failed or was cancelled
EXIT_BAD_INPUT = 2  # a book, an option or a job id could not be used; or the broker is down
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP stopped an embedded run (resumable)

BookArg = Annotated[Path, typer.Argument(help="The book: .epub, .txt, .md or .html.")]
FormatOpt = Annotated[Optional[list[str]], typer.Option(
    "--format", "-f", help="Output format(s): m4b, mp3, ogg, flac, wav (repeat or comma-separate).")]
VoiceOpt = Annotated[str, typer.Option("--voice", help="Voice name (see `tts-jobs voice list`).")]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--out", help="Audiobooks land in OUT/<Author>/<Title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks).")]
ModelDirOpt = Annotated[Optional[Path], typer.Option(
    "--model-dir", help="ChatTTS weights (upstream layout); default TTS_JOBS_MODEL_DIR, else the HF cache.")]
RefineOpt = Annotated[bool, typer.Option("--refine", help="ChatTTS's refine pass: pauses, breaths.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
NotesOpt = Annotated[str, typer.Option(
    "--notes", help="Where footnotes and endnotes are read: end (a Notes chapter after the last "
                    "chapter), chapter (after each chapter's text) or skip (left out, counted in the warnings).")]
KeepFrontOpt = Annotated[bool, typer.Option(
    "--keep-front-matter", help="Also read the cover, title page, copyright page, contents, index and "
                                "colophon, left out by default.")]
MaxBookOpt = Annotated[Optional[int], typer.Option(
    "--max-book-mb", help="Largest book to read, in MiB, on disk and unpacked (default 1024 / 512); "
                          "raise it for a genuine book refused as too large.")]
StrictScriptOpt = Annotated[bool, typer.Option(
    "--fail-on-unsupported-script", help="Fail a book holding letters the voice cannot read (Cyrillic, "
                                         "kana, Hangul...) instead of dropping them with a warning.")]


def job_options(fmt: list[str] | None = None, out: Path | None = None, voice: str = DEFAULT_VOICE,
                priority: int = 0, refine: bool = False, notes: str = "end", keep_front_matter: bool = False,
                max_book_mb: int | None = None, fail_on_unsupported_script: bool = False) -> JobOptions:
    """The options of a command line, as a job records them (checked by the use case)."""
    return JobOptions(formats=parse_formats(fmt), out_dir=out.resolve() if out else None, voice=voice,
                      priority=priority, refine=refine, notes=notes, keep_front_matter=keep_front_matter,
                      max_book_mb=max_book_mb, fail_on_unsupported_script=fail_on_unsupported_script)


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
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Start over instead of resuming this book's unfinished run.")] = False,
    notes: NotesOpt = "end",
    keep_front_matter: KeepFrontOpt = False,
    max_book_mb: MaxBookOpt = None,
    fail_on_unsupported_script: StrictScriptOpt = False,
) -> None:
    """Convert one book here and now (embedded default: SQLite, no servers). Prints the output path.

    An interrupted run of the same book with the same options is resumed: what was spoken is kept."""
    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision)
    rt = open_runtime(settings)
    options = job_options(fmt, out, voice, 0, refine, notes, keep_front_matter, max_book_mb,
                          fail_on_unsupported_script)
    plan = plan_run(rt, book, options, fresh=fresh)  # bad input ends here, before the model loads
    engine = open_engine(settings)
    label = f"{'Resuming' if plan.resume_job else 'Reading'} {book.name}"
    with stopped_with_a_word(), Progress(label) as on_progress:
        job_id = run_book(rt, plan, engine, on_progress)
    print_finished(rt, job_id)


def print_finished(rt: Runtime, job_id: int) -> None:
    """The job's files, one per line; or why it did not finish (exit 1)."""
    status = job_statuses(rt, job_id)[0]
    if status.state != "done":
        fail(f"job {job_id} {status.state}: {status.error}", EXIT_FAILED)
    for path in status.outputs:
        typer.echo(path)


class stopped_with_a_word:
    """Ctrl-C, SIGTERM or SIGHUP on an embedded run: one line saying how to resume, exit 130."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if not isinstance(exc, RunStopped):
            return False
        typer.echo(f"interrupted by {exc.by}: job {exc.job_id} keeps what was spoken; resume it with "
                   f"the same command, or `tts-jobs retry {exc.job_id}`", err=True)
        raise SystemExit(EXIT_INTERRUPTED)


def submit(
    books: Annotated[list[Path], typer.Argument(help="One or more books.")],
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    fmt: FormatOpt = None,
    voice: VoiceOpt = DEFAULT_VOICE,
    out: OutOpt = None,
    refine: RefineOpt = False,
    notes: NotesOpt = "end",
    keep_front_matter: KeepFrontOpt = False,
    max_book_mb: MaxBookOpt = None,
    fail_on_unsupported_script: StrictScriptOpt = False,
) -> None:
    """Record books as jobs and queue them for the workers. Prints one job id per book."""
    from jobs import tasks

    rt = open_runtime(Settings.from_env())
    options = job_options(fmt, out, voice, priority, refine, notes, keep_front_matter, max_book_mb,
                          fail_on_unsupported_script)
    check_options(rt, options)
    check_broker()  # before anything is recorded: a job either runs or is not there
    failed = False
    for book in books:
        try:
            job_id = submit_book(rt, book, options)
        except BookError as exc:
            typer.echo(f"error: {exc}", err=True)
            failed = True
            continue
        queue_or_withdraw(job_id, tasks.send_ingest, lambda job: withdraw_job(rt, job))
        typer.echo(job_id)
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- inspect


def inspect(
    book: Annotated[Path, typer.Argument(help="The book to read.")],
    as_json: JsonOpt = False,
    sentences: Annotated[bool, typer.Option("--sentences", help="List each chapter's sentences.")] = False,
    notes: NotesOpt = "end",
    keep_front_matter: KeepFrontOpt = False,
    max_book_mb: MaxBookOpt = None,
    fail_on_unsupported_script: StrictScriptOpt = False,
) -> None:
    """Show what would be read: metadata, chapters, sentences, estimated duration, warnings."""
    options = job_options(notes=notes, keep_front_matter=keep_front_matter, max_book_mb=max_book_mb,
                          fail_on_unsupported_script=fail_on_unsupported_script)
    report = inspect_book(book, options, with_sentences=sentences)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print_inspection(report, sentences)


# ---------------------------------------------------------------- bulk


def bulk_command(
    inbox: Annotated[Path, typer.Argument(help="Folder of books (.epub, .txt, .md, .html).")],
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Audiobooks land in OUT/<Author>/<Title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks); "
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
    notes: NotesOpt = "end",
    keep_front_matter: KeepFrontOpt = False,
    max_book_mb: MaxBookOpt = None,
    fail_on_unsupported_script: StrictScriptOpt = False,
) -> None:
    """Submit every book in INBOX not submitted before (known by content, so renamed copies are skipped).

    Exit code: 1 if a book failed (with --wait), else 2 if a file could not be read, else 0.
    """
    from jobs import tasks

    settings = Settings.from_env()
    rt = open_runtime(settings)
    out_dir = out.absolute() if out else default_out_root(settings.data_dir)
    options = bulk.BulkOptions(out_dir=out_dir, recursive=recursive, min_age_seconds=min_age,
                               job=job_options(fmt, None, voice, priority, False, notes, keep_front_matter,
                                               max_book_mb, fail_on_unsupported_script))
    for report in bulk.write_pending_reports(rt, out_dir):
        log.info("bulk: wrote report %s", report)
    check_options(rt, options.job)
    check_broker()  # before any book is recorded: each one either runs or is left for the next run
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

"""Commands that take books: `run`, `submit`, `bulk`, `inspect`, `preview`. Each parses, calls a
use case of jobs/ and reports; `jobs/cli/main.py` registers them. The options they share are declared
in `cli_options.py`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import bulk
from jobs.book_folders import default_out_root
from jobs.choices.voices import DEFAULT_VOICE
from jobs.cli.options import (
    DEFAULT_FORMAT,
    BookArg,
    Choices,
    FormatOpt,
    NarratorOpt,
    OutOpt,
    VoiceOpt,
    job_options,
    reading_choices,
    style_choices,
    takes,
)
from jobs.cli.output import duration, print_inspection, print_json
from jobs.cli.progress import Finished, ProgressDisplay, set_loudness, silence_dependency_bars
from jobs.cluster.broker import check_broker, queue_or_withdraw
from jobs.embedded import RunStopped, plan_run, run_book
from jobs.inspect_book import inspect_book
from jobs.preview import DEFAULT_SENTENCES, plan_preview, speak_preview
from jobs.runtime import EngineLoading, Runtime, open_engine, open_runtime
from jobs.settings import Settings, memory_gib_option
from jobs.status import JobStatus, StageProgress, job_statuses, jobs_progress
from jobs.submit import check_options, submit_book, withdraw_job
from pipeline.errors import BookError

log = logging.getLogger("tts_jobs")

EXIT_FAILED = 1  # a book failed or was cancelled
EXIT_BAD_INPUT = 2  # a book, an option or a job id could not be used; or the broker is down
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP stopped an embedded run (resumable)

ModelDirOpt = Annotated[Optional[Path], typer.Option(
    "--model-dir", metavar="DIR",
    help="ChatTTS weights (upstream layout); default TTS_JOBS_MODEL_DIR, else the HF cache.")]
DeviceOpt = Annotated[Optional[str], typer.Option(
    metavar="DEVICE", show_default="TTS_JOBS_DEVICE, else auto", help="auto, cpu, cuda, cuda:N")]
PrecisionOpt = Annotated[Optional[str], typer.Option(
    metavar="PRECISION", show_default="TTS_JOBS_PRECISION, else auto", help="auto, fp32, fp16, bf16, int8")]
MemoryGibOpt = Annotated[Optional[float], typer.Option(
    "--memory-gib", metavar="GIB", show_default="TTS_JOBS_MEMORY_GIB, else the whole card",
    help="The most GPU memory to use (a hard cap); batches and decode slots are sized from it.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Errors and the final output paths only.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Debug logs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def fail(message: str, code: int) -> None:
    """One line on stderr, then exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise SystemExit(code)


# ---------------------------------------------------------------- run / submit


@takes(reading=reading_choices, style=style_choices)
def run(
    book: BookArg,
    reading: Choices,
    style: Choices,
    out: OutOpt = None,
    fmt: FormatOpt = DEFAULT_FORMAT,
    model_dir: ModelDirOpt = None,
    voice: VoiceOpt = DEFAULT_VOICE,
    narrator: NarratorOpt = None,
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
    memory_gib: MemoryGibOpt = None,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Start over instead of resuming this book's unfinished run.")] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Convert one book here and now (embedded default: SQLite, no servers). Prints the output path.

    An interrupted run of the same book with the same options is resumed: what was spoken is kept."""
    set_loudness(quiet, verbose)
    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision,
                                                  memory_gib=memory_gib_option(memory_gib))
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, fmt, out, voice, 0, narrator)
    plan = plan_run(rt, book, options, fresh=fresh)  # bad input ends here, before the model loads
    with stopped_with_a_word(), ProgressDisplay(book.name) as display:
        display(StageProgress("resuming" if plan.resume_job else "loading the model"))
        silence_dependency_bars()
        job_id = run_book(rt, plan, EngineLoading(settings), display)  # the book is read while it loads
    print_finished(rt, job_id, display)


def print_finished(rt: Runtime, job_id: int, display: ProgressDisplay | None = None) -> None:
    """The closing summary, then the job's files on stdout, one per line; or why it did not
    finish (exit 1)."""
    status = job_statuses(rt, job_id)[0]
    if status.state != "done":
        fail(f"job {job_id} {status.state}: {status.error}", EXIT_FAILED)
    if display is not None:
        folder = status.out_dir or (str(Path(status.outputs[0]).parent) if status.outputs else "")
        display.finish(Finished(status.title, status.shown_audio_seconds, folder))
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


@takes(reading=reading_choices, style=style_choices)
def submit(
    books: Annotated[list[Path], typer.Argument(help="One or more books.")],
    reading: Choices,
    style: Choices,
    priority: Annotated[int, typer.Option(metavar="N", help="Higher runs first.")] = 0,
    fmt: FormatOpt = DEFAULT_FORMAT,
    voice: VoiceOpt = DEFAULT_VOICE,
    narrator: NarratorOpt = None,
    out: OutOpt = None,
) -> None:
    """Record books as jobs and queue them for the workers. Prints one job id per book."""
    from jobs import faults
    from jobs.cluster import messages

    settings = Settings.from_env()
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, fmt, out, voice, priority, narrator)
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
        faults.after_commit("submit")
        queue_or_withdraw(job_id, lambda job: messages.send_ingest(rt, job), lambda job: withdraw_job(rt, job))
        typer.echo(job_id)
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- inspect


@takes(reading=reading_choices)
def inspect(
    book: Annotated[Path, typer.Argument(help="The book to read.")],
    reading: Choices,
    as_json: JsonOpt = False,
    sentences: Annotated[bool, typer.Option("--sentences", help="List each chapter's sentences.")] = False,
) -> None:
    """Show what would be read: metadata, chapters, sentences, estimated duration, warnings.

    With the options of a run (--chapters, --lexicon, --speed, --dialogue-voice...) it shows what
    that run would read: `--sentences` lists the text the voice is given."""
    report = inspect_book(book, job_options(reading, Settings.from_env().data_dir), with_sentences=sentences)
    if as_json:
        print_json(report)
        return
    print_inspection(report, sentences)


# ---------------------------------------------------------------- preview


@takes(reading=reading_choices, style=style_choices)
def preview(
    book: BookArg,
    reading: Choices,
    style: Choices,
    chapter: Annotated[Optional[int], typer.Option(
        "--chapter", metavar="N", show_default="the first chapter read",
        help="The chapter to sample, numbered as `inspect` lists them.")] = None,
    sentences: Annotated[int, typer.Option(
        "--sentences", metavar="K", help="How many of its first sentences to speak.")] = DEFAULT_SENTENCES,
    voice: VoiceOpt = DEFAULT_VOICE,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", show_default="BOOK.preview.wav here",
        help="The sample: .wav, .mp3, .ogg or .flac.")] = None,
    model_dir: ModelDirOpt = None,
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
) -> None:
    """Hear a few sentences as the job would speak them (same options, same seeds), in seconds.
    Records no job. Prints the file's path."""
    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision)
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, voice=voice)
    path = output or Path(f"{book.stem}.preview.wav")
    plan = plan_preview(rt, book, options, path, chapter, sentences)  # bad input ends here
    log.info("previewing chapter %d %r: %d sentences", plan.chapter, plan.title, len(plan.work))
    silence_dependency_bars()
    made = speak_preview(plan, open_engine(settings))
    log.info("%s: %s of audio", made.path, duration(made.seconds))
    typer.echo(made.path)


# ---------------------------------------------------------------- bulk


@takes(reading=reading_choices, style=style_choices)
def bulk_command(
    inbox: Annotated[Path, typer.Argument(
        help="Folder of books (.epub, .pdf, .docx, .odt, .fb2, .mobi, .azw3, .txt, .md, .html).")],
    reading: Choices,
    style: Choices,
    out: Annotated[Optional[Path], typer.Option(
        "--out", metavar="DIR",
        help="Audiobooks land in DIR/<Author>/<Title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks); "
             "workers must see the same path.")] = None,
    fmt: FormatOpt = DEFAULT_FORMAT,
    voice: VoiceOpt = DEFAULT_VOICE,
    narrator: NarratorOpt = None,
    priority: Annotated[int, typer.Option(
        metavar="N", help="Higher runs first; a negative value lets interactive "
                                               "submissions overtake the night's books.")] = 0,
    recursive: Annotated[bool, typer.Option("--recursive", help="Also read sub-folders.")] = False,
    min_age: Annotated[float, typer.Option(
        metavar="SECONDS",
        help="Leave files changed less than this many seconds ago (still being copied) for the next run."
    )] = bulk.DEFAULT_MIN_AGE_SECONDS,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Wait until every submitted book is finished; exit 1 if any failed.")] = False,
    poll: Annotated[float, typer.Option(
        metavar="SECONDS", help="Seconds between progress checks with --wait.")] = 10.0,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Submit every book in INBOX not submitted before (known by content, so renamed copies are skipped).

    Exit code: 1 if a book failed (with --wait), else 2 if a file could not be read, else 0.
    """
    from jobs.cluster import messages

    set_loudness(quiet, verbose)
    settings = Settings.from_env()
    rt = open_runtime(settings)
    out_dir = out.absolute() if out else default_out_root(settings.data_dir)
    options = bulk.BulkOptions(out_dir=out_dir, recursive=recursive, min_age_seconds=min_age,
                               job=job_options({**reading, **style}, settings.data_dir, fmt, None, voice,
                                               priority, narrator))
    for report in bulk.write_pending_reports(rt, out_dir):
        log.info("bulk: wrote report %s", report)
    check_options(rt, options.job)
    check_broker()  # before any book is recorded: each one either runs or is left for the next run
    outcomes = bulk.submit_inbox(rt, inbox, options, enqueue=lambda job: messages.send_ingest(rt, job))
    if not as_json:
        _print_outcomes(outcomes)
    submitted = [o.job_id for o in outcomes if o.outcome == bulk.Outcome.SUBMITTED and o.job_id is not None]
    results = _wait_for_books(rt, submitted, poll) if wait and submitted else []
    if as_json:
        print_json({"inbox": str(inbox), "out": str(out_dir), "books": [o.to_json() for o in outcomes],
                    "results": [bulk.book_report(s) for s in results]})
    elif wait:
        _print_summary(outcomes, results)
    raise typer.Exit(_bulk_exit_code(outcomes, results))


def _wait_for_books(rt: Runtime, job_ids: list[int], poll: float) -> list[JobStatus]:
    """Wait for the books, with the progress display: sentences and audio of them all, their
    speed and ETA, and how many books finished."""
    def progress(p: bulk.Progress) -> None:
        display(jobs_progress(rt, job_ids, f"{p.finished}/{p.books} books finished ({p.failed} failed)"))

    with ProgressDisplay("bulk") as display:
        return bulk.wait_for_jobs(rt, job_ids, on_progress=progress,
                                  on_final=lambda s: bulk.write_report(rt, s.id), poll_seconds=poll)


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

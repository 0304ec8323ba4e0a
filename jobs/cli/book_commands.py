"""Commands that take books: `run`, `submit`, `inspect`, `preview` (`bulk` is bulk_commands.py).
Each parses, calls a use case of jobs/ and reports; `jobs/cli/main.py` registers them. The options
they share are declared in `options.py`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from jobs.choices.options import PREVIEW_SENTENCES
from jobs.choices.voices import DEFAULT_VOICE, check_voice_names
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
from jobs.settings import Settings, memory_gib_option

if TYPE_CHECKING:
    from jobs.runtime import Runtime

# The use cases (the database, the book readers, the engine, Celery) are imported inside the
# commands that call them: `--help`, a refusal and every other command pay for none of them.

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
        "--fresh", help="Start over instead of resuming this book's unfinished run, or make a finished "
                        "one again (replacing its files).")] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Convert one book here and now (embedded default: SQLite, no servers). Prints the output path.

    An interrupted run of the same book with the same options is resumed: what was spoken is kept;
    a finished one is not made again (it says where it is; --fresh makes it again)."""
    from jobs.embedded import plan_run, run_book
    from jobs.runtime import EngineLoading, check_engine_settings, open_runtime
    from jobs.status import StageProgress

    set_loudness(quiet, verbose)
    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision,
                                                  memory_gib=memory_gib_option(memory_gib))
    check_engine_settings(settings)  # the device, precision and weights, before a job is recorded
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, fmt, out, voice, 0, narrator)
    plan = plan_run(rt, book, options, fresh=fresh)  # bad input ends here, before the model loads
    if plan.finished_job is not None:
        print_done_already(rt, book, plan.finished_job)
        return
    with stopped_with_a_word(), ProgressDisplay(book.name) as display:
        display(StageProgress("resuming" if plan.resume_job else "loading the model"))
        silence_dependency_bars()
        job_id = run_book(rt, plan, EngineLoading(settings), display)  # the book is read while it loads
    print_finished(rt, job_id, display)


def print_finished(rt: Runtime, job_id: int, display: ProgressDisplay | None = None) -> None:
    """The closing summary, then the job's files on stdout, one per line; or why it did not
    finish (exit 1)."""
    from jobs.status import job_statuses

    status = job_statuses(rt, job_id)[0]
    if status.state != "done":
        fail(f"job {job_id} {status.state}: {status.error}", EXIT_FAILED)
    if display is not None:
        folder = status.out_dir or (str(Path(status.outputs[0]).parent) if status.outputs else "")
        display.finish(Finished(status.title, status.shown_audio_seconds, folder, status.x_realtime,
                                status.sentences_hit_limit, job_id))
    for path in status.outputs:
        typer.echo(path)


def print_done_already(rt: Runtime, book: Path, job_id: int) -> None:
    """A book already made with these choices: where it is (stderr), its files (stdout); exit 0."""
    from jobs.status import job_statuses

    status = job_statuses(rt, job_id)[0]
    log.warning("%s: done already, by job %s with these choices: files in %s (--fresh makes it again)",
                book, job_id, status.out_dir or Path(status.outputs[0]).parent)
    for path in status.outputs:
        typer.echo(path)


class stopped_with_a_word:
    """Ctrl-C, SIGTERM or SIGHUP on an embedded run: one line saying how to resume, exit 130."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        from jobs.embedded import RunStopped

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
    from jobs.queueing import submit_to_workers
    from jobs.runtime import open_runtime

    settings = Settings.from_env()
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, fmt, out, voice, priority, narrator)
    failed = False
    for submission in submit_to_workers(rt, books, options):
        if submission.error is not None:
            typer.echo(f"error: {submission.error}", err=True)
            failed = True
        else:
            typer.echo(submission.job_id)
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
    from jobs.inspect_book import inspect_book
    from jobs.runtime import open_existing_runtime

    settings = Settings.from_env()
    options = job_options(reading, settings.data_dir)
    check_voice_names(open_existing_runtime(settings), options.voice, options.dialogue_voice)
    report = inspect_book(book, options, with_sentences=sentences)
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
        "--sentences", metavar="K", help="How many of its first sentences to speak.")] = PREVIEW_SENTENCES,
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
    from jobs.preview import plan_preview, speak_preview
    from jobs.runtime import check_engine_settings, open_engine, open_runtime

    settings = Settings.from_env().with_overrides(model_dir=model_dir, device=device, precision=precision)
    check_engine_settings(settings)
    rt = open_runtime(settings)
    options = job_options({**reading, **style}, settings.data_dir, voice=voice)
    path = output or Path(f"{book.stem}.preview.wav")
    plan = plan_preview(rt, book, options, path, chapter, sentences)  # bad input ends here
    log.info("previewing chapter %d %r: %d sentences", plan.chapter, plan.title, len(plan.work))
    silence_dependency_bars()
    made = speak_preview(plan, open_engine(settings))
    log.info("%s: %s of audio", made.path, duration(made.seconds))
    typer.echo(made.path)

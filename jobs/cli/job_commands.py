"""Commands about recorded jobs: `status`, `cancel`, `retry`. `jobs/cli/main.py` registers them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from jobs.cli.book_commands import (
    JsonOpt,
    ModelDirOpt,
    QuietOpt,
    VerboseOpt,
    print_finished,
    stopped_with_a_word,
)
from jobs.cli.output import NO_JOBS, print_json, print_status, status_view
from jobs.cli.progress import ProgressDisplay, set_loudness, silence_dependency_bars
from jobs.settings import Settings
from pipeline.errors import NoSuchJob

if TYPE_CHECKING:
    from jobs.runtime import Runtime

# The use cases are imported inside the commands that call them (see book_commands.py).

JobArg = Annotated[int, typer.Argument(help="Job id.")]


def status(
    job: Annotated[Optional[int], typer.Argument(help="A job id: every detail, and its chapters.")] = None,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every 2 seconds until Ctrl-C.")] = False,
) -> None:
    """All jobs, or one job in detail: progress, audio, speed, elapsed time and ETA.

    On a terminal a table that fits its width; piped, tab-separated lines with full values under a
    header line. Speed: audio seconds per second, over the last 5 minutes while a job is spoken,
    over the time its batches ran once it is done. ETA: the text still to speak at the recent rate
    (none until a batch has finished)."""
    from jobs.runtime import open_existing_runtime
    from jobs.status import job_statuses

    settings = Settings.from_env()
    rt = open_existing_runtime(settings)
    if rt is None:  # nothing was ever run with these settings: say where we looked, make nothing
        _no_database(settings, job, as_json)
        return
    if watch and not as_json:
        _watch_status(rt, job)
        return
    statuses = job_statuses(rt, job)
    if as_json:
        payload = [s.to_json() for s in statuses]
        print_json(payload[0] if job is not None else payload)
        return
    print_status(statuses, detail=job is not None)


def _no_database(settings: Settings, job: int | None, as_json: bool) -> None:
    from jobs.runtime import database_file

    if job is not None:  # the same line as cancel and retry give for a job that is not there
        raise NoSuchJob(job)
    if as_json:
        print_json([])
        return
    typer.echo(f"{NO_JOBS}; nothing was run with these settings: no database at {database_file(settings)} "
               f"(TTS_JOBS_DATA_DIR={settings.data_dir}); a run's jobs are where its TTS_JOBS_DATA_DIR was "
               "(scripts/quickstart's: ./data in the checkout)", err=True)


def _existing_runtime(job: int, settings: Settings) -> Runtime:
    """The runtime of the database that holds ``job``; no job (exit 2) where there is no database."""
    from jobs.runtime import open_existing_runtime

    rt = open_existing_runtime(settings)
    if rt is None:
        raise NoSuchJob(job)
    return rt


def _watch_status(rt: Runtime, job: int | None) -> None:
    from rich.console import Console
    from rich.live import Live

    from jobs.status import job_statuses

    console = Console()
    view = status_view(job_statuses(rt, job), console.width)
    with Live(view, console=console, refresh_per_second=1) as live:
        try:
            while True:
                time.sleep(2)
                live.update(status_view(job_statuses(rt, job), console.width))
        except KeyboardInterrupt:
            pass


def cancel(job: JobArg) -> None:
    """Stop a job; its finished sentence audio is kept for a later retry."""
    from jobs.lifecycle import cancel_job

    cancel_job(_existing_runtime(job, Settings.from_env()), job)
    typer.echo(f"cancelled {job}")


def retry(
    job: JobArg,
    model_dir: ModelDirOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Start a failed, cancelled or interrupted job again; only what is missing is redone.

    A job of `tts-jobs run` resumes here, in this process; a cluster job goes back to the workers."""
    from jobs.embedded import claim_job_run, resume, run_job
    from jobs.lifecycle import resumes_in_process
    from jobs.runners import recognise_interrupted
    from jobs.runtime import EngineLoading, check_engine_settings
    from jobs.status import StageProgress

    set_loudness(quiet, verbose)
    settings = Settings.from_env().with_overrides(model_dir=model_dir)
    rt = _existing_runtime(job, settings)
    recognise_interrupted(rt)
    if resumes_in_process(rt, job):
        check_engine_settings(settings)  # before the job is reopened
        claim = claim_job_run(rt, job)  # never beside a `run` of the same book (exit 2)
        try:
            with stopped_with_a_word(), ProgressDisplay(f"job {job}") as display:
                display(StageProgress("loading the model"))
                silence_dependency_bars()
                run_job(rt, resume(rt, job), EngineLoading(settings), display)
        finally:
            claim.release()
        print_finished(rt, job, display)
        return
    _retry_on_the_workers(rt, job)


def _retry_on_the_workers(rt: Runtime, job: int) -> None:
    from jobs.queueing import retry_on_workers

    plan = retry_on_workers(rt, job)
    typer.echo(f"retrying {job}: {plan.next_step} ({plan.sentences_reset} sentences re-queued)")

"""Commands about recorded jobs: `status`, `cancel`, `retry`. `jobs/cli.py` registers them."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer

from jobs.broker import check_broker, queue_or_withdraw
from jobs.cli_books import JsonOpt, ModelDirOpt, print_finished, stopped_with_a_word
from jobs.cli_output import Progress, print_status, status_table
from jobs.embedded import resume, run_job
from jobs.lifecycle import cancel_job, fail_job, resumes_in_process, retry_job
from jobs.runners import recognise_interrupted
from jobs.runtime import Runtime, open_engine, open_runtime
from jobs.settings import Settings
from jobs.status import job_statuses

JobArg = Annotated[int, typer.Argument(help="Job id.")]


def status(
    job: Annotated[Optional[int], typer.Argument(help="A job id for the per-chapter detail.")] = None,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every 2 seconds until Ctrl-C.")] = False,
) -> None:
    """All jobs, or one job in detail, with progress, throughput and ETA."""
    rt = open_runtime(Settings.from_env())
    if watch and not as_json:
        _watch_status(rt, job)
        return
    statuses = job_statuses(rt, job)
    if as_json:
        payload = [s.to_json() for s in statuses]
        typer.echo(json.dumps(payload[0] if job is not None else payload, indent=2))
        return
    print_status(statuses, detail=job is not None)


def _watch_status(rt: Runtime, job: int | None) -> None:
    from rich.live import Live

    with Live(status_table(job_statuses(rt, job)), refresh_per_second=1) as live:
        try:
            while True:
                time.sleep(2)
                live.update(status_table(job_statuses(rt, job)))
        except KeyboardInterrupt:
            pass


def cancel(job: JobArg) -> None:
    """Stop a job; its finished sentence audio is kept for a later retry."""
    cancel_job(open_runtime(Settings.from_env()), job)
    typer.echo(f"cancelled {job}")


def retry(
    job: JobArg,
    model_dir: ModelDirOpt = None,
) -> None:
    """Start a failed, cancelled or interrupted job again; only what is missing is redone.

    A job of `tts-jobs run` resumes here, in this process; a cluster job goes back to the workers."""
    settings = Settings.from_env().with_overrides(model_dir=model_dir)
    rt = open_runtime(settings)
    recognise_interrupted(rt)
    if resumes_in_process(rt, job):
        engine = open_engine(settings)
        with stopped_with_a_word(), Progress(f"Resuming job {job}") as on_progress:
            run_job(rt, resume(rt, job), engine, on_progress)
        print_finished(rt, job)
        return
    _retry_on_the_workers(rt, job)


def _retry_on_the_workers(rt: Runtime, job: int) -> None:
    from jobs import tasks

    check_broker()
    plan = retry_job(rt, job)
    queue_or_withdraw(job, lambda _: tasks.enqueue_next(plan),
                      lambda _: fail_job(rt, job, "could not be queued: the broker did not answer; "
                                                  f"run `tts-jobs retry {job}` once it does"),
                      withdrawn="stays failed")
    typer.echo(f"retrying {job}: {plan.next_step} ({plan.sentences_reset} sentences re-queued)")

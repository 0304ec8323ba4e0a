"""Commands about recorded jobs: `status`, `cancel`, `retry`. `jobs/cli.py` registers them."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer

from jobs.cli_books import EXIT_FAILED, JsonOpt, fail
from jobs.cli_output import print_status, status_table
from jobs.lifecycle import cancel_job, retry_job
from jobs.runtime import Runtime, open_runtime
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
    rt = open_runtime(Settings.from_env())
    if not cancel_job(rt, job):
        fail(f"job {job} is not running (see `tts-jobs status {job}`)", EXIT_FAILED)
    typer.echo(f"cancelled {job}")


def retry(job: JobArg) -> None:
    """Re-queue only what is missing or failed of a failed or cancelled job."""
    from jobs import tasks

    rt = open_runtime(Settings.from_env())
    plan = retry_job(rt, job)
    tasks.enqueue_next(plan)
    typer.echo(f"retrying {job}: {plan.next_step} ({plan.sentences_reset} sentences re-queued)")

"""Operations commands: `tts-jobs flower` (monitoring) and `tts-jobs bulk` (nightly inbox runs).

Registered on the main Typer app by ``register(app)``. Like every command, each one parses,
calls a use case (jobs/flower.py, jobs/bulk.py) and reports.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import bulk, service
from jobs.flower import DEFAULT_PORT, LOOPBACK, FlowerConfigError, FlowerOptions, run_flower
from jobs.settings import Settings

log = logging.getLogger("tts_jobs")

EXIT_FAILED = 1  # a submitted book failed or was cancelled
EXIT_BAD_INPUT = 2  # a file in the inbox could not be read; or Flower refused to start


def register(app: typer.Typer) -> None:
    """Add the `flower` and `bulk` commands to the main app."""
    app.command("flower")(flower)
    app.command("bulk")(bulk_command)


# ---------------------------------------------------------------- flower

PortOpt = Annotated[int, typer.Option(help="Port of the web UI and API.")]
AddressOpt = Annotated[str, typer.Option(help="Interface to bind (0.0.0.0 inside a container).")]
LocalOpt = Annotated[bool, typer.Option(
    "--local", help="Run without FLOWER_BASIC_AUTH, reachable from this machine only (127.0.0.1).")]
AllowControlOpt = Annotated[bool, typer.Option(
    "--allow-control", help="Let the UI/API shut down workers and revoke tasks (default: read-only).")]
StateFileOpt = Annotated[Optional[Path], typer.Option(help="Keep Flower's task history in this file.")]
UrlPrefixOpt = Annotated[Optional[str], typer.Option(help="Serve under /PREFIX/ behind a reverse proxy.")]


def flower(
    port: PortOpt = DEFAULT_PORT,
    address: AddressOpt = LOOPBACK,
    local: LocalOpt = False,
    allow_control: AllowControlOpt = False,
    state_file: StateFileOpt = None,
    url_prefix: UrlPrefixOpt = None,
) -> None:
    """Monitor the workers in a browser (Celery Flower). Needs FLOWER_BASIC_AUTH=user:password."""
    options = FlowerOptions(port=port, address=address, local=local, allow_control=allow_control,
                            state_file=state_file, url_prefix=url_prefix)
    try:
        code = run_flower(options, os.environ)
    except FlowerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    raise typer.Exit(code)


# ---------------------------------------------------------------- bulk

InboxArg = Annotated[Path, typer.Argument(help="Folder of books (.epub, .txt, .md, .html).")]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--out", help="Audiobooks land in OUT/<title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks); "
                  "workers must see the same path.")]
FormatOpt = Annotated[Optional[list[str]], typer.Option(
    "--format", "-f", help="Output format(s): m4b, mp3, ogg, flac, wav (repeat or comma-separate).")]
VoiceOpt = Annotated[str, typer.Option("--voice", help="Voice name (see `tts-jobs voice list`).")]
PriorityOpt = Annotated[int, typer.Option(help="Higher runs first; a negative value lets interactive "
                                               "submissions overtake the night's books.")]
RecursiveOpt = Annotated[bool, typer.Option("--recursive", help="Also read sub-folders.")]
MinAgeOpt = Annotated[float, typer.Option(
    help="Leave files changed less than this many seconds ago (still being copied) for the next run.")]
WaitOpt = Annotated[bool, typer.Option(
    "--wait", help="Wait until every submitted book is finished; exit 1 if any failed.")]
PollOpt = Annotated[float, typer.Option(help="Seconds between progress checks with --wait.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def bulk_command(
    inbox: InboxArg,
    out: OutOpt = None,
    fmt: FormatOpt = None,
    voice: VoiceOpt = service.DEFAULT_VOICE,
    priority: PriorityOpt = 0,
    recursive: RecursiveOpt = False,
    min_age: MinAgeOpt = bulk.DEFAULT_MIN_AGE_SECONDS,
    wait: WaitOpt = False,
    poll: PollOpt = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Submit every book in INBOX not submitted before (known by content, so renamed copies are skipped).

    Exit code: 1 if a book failed (with --wait), else 2 if a file could not be read, else 0.
    """
    from jobs import tasks

    settings = Settings.from_env()
    rt = service.open_runtime(settings)
    out_dir = out.absolute() if out else bulk.default_out_dir(settings.data_dir)
    options = bulk.BulkOptions(out_dir=out_dir, recursive=recursive, min_age_seconds=min_age,
                               job=service.JobOptions(formats=_formats(fmt), voice=voice, priority=priority))
    for report in bulk.write_pending_reports(rt, out_dir):
        log.info("bulk: wrote report %s", report)
    outcomes = bulk.submit_inbox(rt, inbox, options, enqueue=tasks.send_ingest)
    if not as_json:
        _print_outcomes(outcomes)
    submitted = [o.job_id for o in outcomes if o.outcome == bulk.Outcome.SUBMITTED and o.job_id is not None]
    results = []
    if wait and submitted:
        results = bulk.wait_for_jobs(rt, submitted, on_progress=_log_progress,
                                     on_final=lambda s: bulk.write_report(rt, s.id), poll_seconds=poll)
    if as_json:
        payload = {"inbox": str(inbox), "out": str(out_dir), "books": [o.to_json() for o in outcomes],
                   "results": [bulk.book_report(s) for s in results]}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    elif wait:
        _print_summary(outcomes, results)
    raise typer.Exit(_exit_code(outcomes, results))


def _formats(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return ("m4b",)
    return tuple(f.strip().lower() for v in values for f in v.split(",") if f.strip())


def _print_outcomes(outcomes: list[bulk.BookOutcome]) -> None:
    for o in outcomes:
        if o.outcome == bulk.Outcome.SUBMITTED:
            typer.echo(f"submitted   {o.path.name} -> job {o.job_id} ({o.book_dir})")
        else:
            typer.echo(f"{o.outcome.value:<11} {o.path.name}: {o.reason}")
    if not outcomes:
        typer.echo("no books found")


def _log_progress(progress: bulk.Progress) -> None:
    log.info("bulk: %s", progress.line())


def _print_summary(outcomes: list[bulk.BookOutcome], results: list[service.JobStatus]) -> None:
    for s in results:
        detail = ", ".join(s.outputs) if s.state == "done" else (s.error or "")
        seconds = s.report.get("total_seconds", s.audio_seconds)  # with pauses, once assembled
        typer.echo(f"{s.state:<11} job {s.id} {s.title} ({_duration(seconds)}): {detail}")
    count = {kind: sum(o.outcome == kind for o in outcomes) for kind in bulk.Outcome}
    done = sum(s.state == "done" for s in results)
    typer.echo(f"summary: {count[bulk.Outcome.SUBMITTED]} submitted, {count[bulk.Outcome.SKIPPED]} skipped, "
               f"{count[bulk.Outcome.UNREADABLE]} unreadable; {done} done, {len(results) - done} failed")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _exit_code(outcomes: list[bulk.BookOutcome], results: list[service.JobStatus]) -> int:
    if any(s.state != "done" for s in results):
        return EXIT_FAILED
    if any(o.outcome == bulk.Outcome.UNREADABLE for o in outcomes):
        return EXIT_BAD_INPUT
    return 0

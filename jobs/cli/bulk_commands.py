"""`tts-jobs bulk`: submit every new book of an inbox folder, optionally wait for them all and
write each book's report (jobs/bulk.py, jobs/bulk_reports.py); `jobs/cli/main.py` registers it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from jobs.choices.options import BULK_MIN_AGE_SECONDS
from jobs.choices.voices import DEFAULT_VOICE
from jobs.cli.book_commands import EXIT_BAD_INPUT, EXIT_FAILED, JsonOpt, QuietOpt, VerboseOpt
from jobs.cli.options import (
    DEFAULT_FORMAT,
    Choices,
    FormatOpt,
    NarratorOpt,
    VoiceOpt,
    job_options,
    reading_choices,
    style_choices,
    takes,
)
from jobs.cli.output import duration, print_json
from jobs.cli.progress import ProgressDisplay, set_loudness
from jobs.settings import Settings

if TYPE_CHECKING:  # the use cases are imported inside the command that calls them (see book_commands.py)
    from jobs import bulk
    from jobs.runtime import Runtime
    from jobs.status import JobStatus

log = logging.getLogger("tts_jobs")


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
    )] = BULK_MIN_AGE_SECONDS,
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

    Nightly at 01:30 from cron (crontab -e; the cluster's variables above it, docs/operations.md):

    30 1 * * * tts-jobs bulk /srv/inbox --out /srv/audiobooks --wait >>/var/log/bulk.log 2>&1

    With compose: 30 1 * * * cd /srv/tts-jobs && docker compose run --rm bulk >>/var/log/bulk.log 2>&1
    """
    from jobs import bulk, bulk_reports
    from jobs.book_folders import default_out_root
    from jobs.queueing import submit_inbox_to_workers
    from jobs.runtime import open_runtime

    set_loudness(quiet, verbose)
    settings = Settings.from_env()
    rt = open_runtime(settings)
    out_dir = out.absolute() if out else default_out_root(settings.data_dir)
    options = bulk.BulkOptions(out_dir=out_dir, recursive=recursive, min_age_seconds=min_age,
                               job=job_options({**reading, **style}, settings.data_dir, fmt, None, voice,
                                               priority, narrator))
    for report in bulk_reports.write_pending_reports(rt, out_dir):
        log.info("bulk: wrote report %s", report)
    outcomes = submit_inbox_to_workers(rt, inbox, options)
    if not as_json:
        _print_outcomes(outcomes)
    submitted = [o.job_id for o in outcomes if o.outcome == bulk.Outcome.SUBMITTED and o.job_id is not None]
    results = _wait_for_books(rt, submitted, poll) if wait and submitted else []
    if as_json:
        print_json({"inbox": str(inbox), "out": str(out_dir), "books": [o.to_json() for o in outcomes],
                    "results": [bulk_reports.book_report(s) for s in results]})
    elif wait:
        _print_summary(outcomes, results)
    raise typer.Exit(_bulk_exit_code(outcomes, results))


def _wait_for_books(rt: Runtime, job_ids: list[int], poll: float) -> list[JobStatus]:
    """Wait for the books, with the progress display: sentences and audio of them all, their
    speed and ETA, and how many books finished."""
    from jobs import bulk_reports
    from jobs.status import jobs_progress

    def progress(p: bulk_reports.Progress) -> None:
        display(jobs_progress(rt, job_ids, f"{p.finished}/{p.books} books finished ({p.failed} failed)"))

    with ProgressDisplay("bulk") as display:
        return bulk_reports.wait_for_jobs(rt, job_ids, on_progress=progress,
                                          on_final=lambda s: bulk_reports.write_report(rt, s.id),
                                          poll_seconds=poll)


def _print_outcomes(outcomes: list[bulk.BookOutcome]) -> None:
    from jobs import bulk

    for o in outcomes:
        if o.outcome == bulk.Outcome.SUBMITTED:
            typer.echo(f"submitted   {o.path.name} -> job {o.job_id} ({o.book_dir})")
        else:
            typer.echo(f"{o.outcome.value:<11} {o.path.name}: {o.reason}")
    if not outcomes:
        typer.echo("no books found")


def _print_summary(outcomes: list[bulk.BookOutcome], results: list[JobStatus]) -> None:
    from jobs import bulk

    for s in results:
        detail = ", ".join(s.outputs) if s.state == "done" else (s.error or "")
        seconds = s.report.get("total_seconds", s.audio_seconds)  # with pauses, once assembled
        typer.echo(f"{s.state:<11} job {s.id} {s.title} ({duration(seconds)}): {detail}")
    count = {kind: sum(o.outcome == kind for o in outcomes) for kind in bulk.Outcome}
    done = sum(s.state == "done" for s in results)
    typer.echo(f"summary: {count[bulk.Outcome.SUBMITTED]} submitted, {count[bulk.Outcome.SKIPPED]} skipped, "
               f"{count[bulk.Outcome.UNREADABLE]} unreadable; {done} done, {len(results) - done} failed")


def _bulk_exit_code(outcomes: list[bulk.BookOutcome], results: list[JobStatus]) -> int:
    from jobs import bulk

    if any(s.state != "done" for s in results):
        return EXIT_FAILED
    if any(o.outcome == bulk.Outcome.UNREADABLE for o in outcomes):
        return EXIT_BAD_INPUT
    return 0

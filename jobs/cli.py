"""The `tts-jobs` command line: the one place where commands are registered.

The commands live by what they act on — books (`cli_books.py`), recorded jobs (`cli_jobs.py`),
operations (`cli_ops.py`) — and each parses, calls a use case of jobs/ and reports. Heavy modules
(torch, ChatTTS, Celery) are imported inside the use cases that need them, so `tts-jobs status`
starts instantly.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from jobs import cli_books, cli_jobs, cli_ops
from jobs.cli_books import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail
from pipeline.errors import BookError, BrokerUnreachable, InputError, TtsJobsError

app = typer.Typer(help="Batch audiobook factory: books in, ChatTTS-read audiobooks out.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
model_app = typer.Typer(help="ChatTTS weights.", no_args_is_help=True)
voice_app = typer.Typer(help="Named voices (speaker embeddings).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(model_app, name="model")
app.add_typer(voice_app, name="voice")

# books
app.command("run")(cli_books.run)
app.command("submit")(cli_books.submit)
app.command("bulk")(cli_books.bulk_command)
app.command("inspect")(cli_books.inspect)
# recorded jobs
app.command("status")(cli_jobs.status)
app.command("cancel")(cli_jobs.cancel)
app.command("retry")(cli_jobs.retry)
# operations
app.command("worker")(cli_ops.worker)
app.command("flower")(cli_ops.flower)
app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False)(cli_ops.bench)
db_app.command("upgrade")(cli_ops.db_upgrade)
model_app.command("synthetic")(cli_ops.model_synthetic)
model_app.command("download")(cli_ops.model_download)
voice_app.command("new")(cli_ops.voice_new)
voice_app.command("list")(cli_ops.voice_list)


def main() -> None:
    """Console entry point: one-line errors, no tracebacks for problems the user can fix."""
    _configure_logging()
    try:
        app()
    except (BookError, InputError, BrokerUnreachable) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except TtsJobsError as exc:
        fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:  # before a job started (or outside one): nothing to resume
        fail("interrupted", EXIT_INTERRUPTED)


def _configure_logging() -> None:
    level = os.environ.get("TTS_JOBS_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("ChatTTS", "httpx", "numba", "urllib3", "transformers", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


if __name__ == "__main__":
    main()

"""The `tts-jobs` command line: the one place where commands are registered.

The commands live by what they act on — books (`book_commands.py`, `bulk_commands.py`), recorded
jobs (`job_commands.py`), operations (`ops_commands.py`) — and each parses, calls a use case of jobs/ and reports. Heavy modules
(torch, ChatTTS, Celery) are imported inside the use cases that need them, so `tts-jobs status`
starts instantly.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Annotated, Any, NoReturn

import typer
from typer._click import exceptions as click  # typer carries its own click

from jobs.cli import book_commands as cli_books
from jobs.cli import bulk_commands as cli_bulk
from jobs.cli import job_commands as cli_jobs
from jobs.cli import ops_commands as cli_ops
from jobs.cli.book_commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, QuietOpt, VerboseOpt, fail
from jobs.cli.progress import configure_logging, set_loudness
from pipeline.errors import BookError, BrokerUnreachable, InputError, TtsJobsError

PROG = "tts-jobs"

# The options of a book (`run`, `submit`, `bulk`; `inspect` and `preview` take those that change
# what is read or heard), one example each
BOOK_OPTION_EXAMPLES = (
    ("--chapters 1-3,7,12-", "or a title; numbered as `inspect` lists them"),
    ("--speed 4", "1 slowest to 9; ChatTTS's own is 5"),
    ("--lexicon names.txt", "lines like `Hermione = Her-my-oh-nee`"),
    ("--dialogue-voice anna", "quoted speech in another voice"),
    ("--oral 2 --pause 4", "the refine pass's levels"),
    ("--narrator \"Jim Dale\"", "the narrator tag"),
)
EPILOG = "\n\n".join([
    f"Example: {PROG} run book.epub --out ~/Audiobooks   (then `{PROG} COMMAND --help`)",
    f"Hear it first: {PROG} preview book.epub --chapter 3 -o sample.mp3   (records no job)",
    "Book options:",
    *(f"  {PROG} run book.epub {option}   ({what})" for option, what in BOOK_OPTION_EXAMPLES),
])

app = typer.Typer(help="Batch audiobook factory: books in, ChatTTS-read audiobooks out.", epilog=EPILOG,
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
model_app = typer.Typer(help="ChatTTS weights.", no_args_is_help=True)
voice_app = typer.Typer(help="Named voices (speaker embeddings).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(model_app, name="model")
app.add_typer(voice_app, name="voice")


def _register(group: typer.Typer, name: str, function: Callable[..., Any], example: str) -> None:
    group.command(name, epilog=f"Example: {PROG} {example}")(function)


# books
_register(app, "run", cli_books.run, "run book.epub --out ~/Audiobooks -f m4b,mp3 --chapters 1-3 --speed 4")
_register(app, "submit", cli_books.submit, "submit book1.epub book2.epub --priority 5")
_register(app, "bulk", cli_bulk.bulk_command, "bulk /srv/books/inbox --out /srv/books/audiobooks --wait")
_register(app, "inspect", cli_books.inspect, "inspect book.epub --sentences --chapters 1-2 --lexicon n.txt")
_register(app, "preview", cli_books.preview, "preview book.epub --chapter 3 --speed 4 -o sample.mp3")
# recorded jobs
_register(app, "status", cli_jobs.status, "status 7   (one job in detail; `status --json` for scripts)")
_register(app, "cancel", cli_jobs.cancel, "cancel 7")
_register(app, "retry", cli_jobs.retry, "retry 7")
# operations
_register(app, "worker", cli_ops.worker, "worker --gpus all   (and `worker --cpu` once per host)")
_register(app, "flower", cli_ops.flower, "flower --port 5555   (with FLOWER_BASIC_AUTH=ops:PASSWORD)")
# bench hands its whole command line to the measurement tools' own parser (pipeline/bench)
app.command("bench", add_help_option=False, context_settings={
    "allow_extra_args": True, "ignore_unknown_options": True})(cli_ops.bench)
_register(db_app, "upgrade", cli_ops.db_upgrade, "db upgrade")
_register(model_app, "synthetic", cli_ops.model_synthetic, "model synthetic ./tiny-weights --size tiny")
_register(model_app, "download", cli_ops.model_download, "model download --dir /srv/models")
_register(voice_app, "new", cli_ops.voice_new, "voice new narrator --seed 42 --sample narrator.wav")
_register(voice_app, "list", cli_ops.voice_list, "voice list")


def _version(show: bool) -> None:
    if show:
        typer.echo(f"{PROG} {metadata.version('tts-jobs')}")
        raise typer.Exit()


@app.callback()
def everywhere(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Batch audiobook factory: books in, ChatTTS-read audiobooks out."""
    set_loudness(quiet, verbose)


def main() -> None:
    """Console entry point: one-line errors, no tracebacks for problems the user can fix."""
    try:
        configure_logging()
    except InputError as exc:  # a setting that cannot be used (a secret file): before anything else
        fail(str(exc), EXIT_BAD_INPUT)
    command = typer.main.get_command(app)
    readable_help(command)
    try:
        code = command.main(prog_name=PROG, standalone_mode=False)
    except click.NoArgsIsHelpError as exc:  # a group named alone: its help, as click shows it
        typer.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        raise SystemExit(EXIT_BAD_INPUT) from None
    except click.UsageError as exc:
        fail(usage_line(exc), EXIT_BAD_INPUT)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except typer.Abort:
        fail("aborted", EXIT_FAILED)
    except (BookError, InputError, BrokerUnreachable) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except TtsJobsError as exc:
        fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:  # before a job started (or outside one): nothing to resume
        fail("interrupted", EXIT_INTERRUPTED)
    leave(code if isinstance(code, int) else 0)


def leave(code: int) -> NoReturn:
    """End the process once its command has returned: output flushed, then at once, without
    unwinding the interpreter. A finished `tts-jobs run` spent 0.6-0.8 s after its last line
    tearing down what it no longer needs (the engine's modules and threads, stitch helpers that end
    by themselves when their pipe closes). Nothing is lost: every file a command writes is
    complete and renamed into place, and every database change committed, before it returns, as
    it must be for a kill at that moment too."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that went away (`tts-jobs status | head -1`): nothing to tell it
            pass
    os._exit(code)


def usage_line(exc: click.UsageError) -> str:
    """A mistake on the command line (an unknown option, a value of the wrong kind, a missing
    argument) as one line naming it and where the command's options are listed: the same form as
    every other bad input, not click's boxed usage text."""
    where = exc.ctx.command_path if exc.ctx is not None else PROG
    return f"{_mistake(exc)} (see `{where} --help`)"


_VALUE_KINDS = {"int_parsing": "not a whole number", "float_parsing": "not a number",
                "int_from_float": "not a whole number", "bool_parsing": "not yes or no"}


def _mistake(exc: click.UsageError) -> str:
    """``--speed fast: not a whole number`` for a value of the wrong kind; click's words otherwise."""
    errors = getattr(exc.__cause__, "errors", None)  # typer checks values with a pydantic adapter
    if isinstance(exc, click.BadParameter) and exc.param is not None and callable(errors):
        error = errors()[0]
        name = exc.param.opts[0] if exc.param.param_type_name == "option" else (exc.param.metavar or exc.param.name or "").upper()
        return f"{name} {error.get('input')}: {_VALUE_KINDS.get(error['type'], error['msg'].lower())}"
    message = " ".join(exc.format_message().split()).rstrip(".")
    return message[:1].lower() + message[1:]


def readable_help(command: Any) -> None:
    """Type labels a person reads, on every command of ``command`` (a typer group or command):
    none on a flag, a word on the rest.

    Typer's rich help asks each parameter for its type label, flags included, and labels them
    by annotation (`--refine <bool>`, `-f <list[str]>`), where click's help shows a flag bare.
    Each parameter answers with its own metavar, else one word for its type (PATH, TEXT, N...),
    and a flag with none. The help option is made on first use and kept: it is made here."""
    for param in [*command.params, command.get_help_option(typer.Context(command))]:
        if param is not None:
            label = _type_label(param)
            param.display_type_rich = lambda ctx, label=label: label
            if param.param_type_name == "argument" and not param.metavar:
                param.metavar = param.name.upper()  # the usage line's BOOK, not {book}
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


_TYPE_WORDS = {"str": "TEXT", "int": "N", "float": "NUMBER", "Path": "PATH"}


def _type_label(param: Any) -> str | None:
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar:
        word = param.metavar
    else:  # typer's parameters know their annotation ("list[str]"), click's their type
        bare = param.bare_type() if hasattr(param, "bare_type") else param.type.name
        element = bare.removeprefix("list[").removesuffix("]")
        word = _TYPE_WORDS.get(element, element.upper())
    return f"{word}..." if param.nargs == -1 else word


if __name__ == "__main__":
    main()

"""The options the book commands share, declared once.

A group is a function whose parameters are the options (Typer reads them as it reads a command's);
``takes(name=group)`` adds them to a command, and the command receives what the group returns
under ``name``: the choices as ``JobOptions`` fields. `run`, `submit` and `bulk` take every group;
`preview` what changes the sound; `inspect` what changes what is read.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from jobs.choices.lexicons import with_user_lexicon
from jobs.choices.options import FORMATS, JobOptions, parse_formats
from jobs.choices.voices import DEFAULT_VOICE
from pipeline.delivery import DEFAULT_SPEED

Command = TypeVar("Command", bound=Callable[..., Any])
Choices = dict[str, Any]  # JobOptions fields, and "lexicon_path": the --lexicon file to read

BookArg = Annotated[Path, typer.Argument(
    help="The book: .epub, .pdf, .docx, .odt, .fb2, .mobi, .azw3, .txt, .md or .html.")]
FormatOpt = Annotated[list[str], typer.Option(
    "--format", "-f", metavar="FMT",
    help=f"Output format(s): {', '.join(FORMATS)} (repeat or comma-separate).")]
DEFAULT_FORMAT = ("m4b",)  # shown in the help as the default (jobs/choices/options.py has the same default)
VoiceOpt = Annotated[str, typer.Option(
    "--voice", metavar="NAME", help="The narrator's voice (see `tts-jobs voice list`).")]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--out", metavar="DIR",
    help="Audiobooks land in DIR/<Author>/<Title>/ (default: $TTS_JOBS_DATA_DIR/audiobooks).")]
NarratorOpt = Annotated[Optional[str], typer.Option(
    "--narrator", metavar="TEXT",
    help="The narrator tag players show, e.g. --narrator \"Read by ChatTTS\" (default: the voices used).")]


def reading_choices(
    chapters: Annotated[Optional[list[str]], typer.Option(
        "--chapters", metavar="LIST|TITLE",
        help="Only these chapters, numbered as `inspect` lists them, e.g. --chapters 1-3,7,12- or "
             "--chapters Loomings (a title, any case; repeat to add more).")] = None,
    lexicon: Annotated[Optional[Path], typer.Option(
        "--lexicon", metavar="FILE",
        help="Pronunciations, one `written = spoken` a line, e.g. --lexicon names.txt (beside "
             "$TTS_JOBS_DATA_DIR/lexicon.txt and the book's own; docs/operations.md has the rules).")] = None,
    speed: Annotated[int, typer.Option(
        "--speed", metavar="1-9",
        help="The pace: 1 (slowest) to 9 (fastest), ChatTTS's speed_N prompt, e.g. --speed 4."
    )] = DEFAULT_SPEED,
    dialogue_voice: Annotated[Optional[str], typer.Option(
        "--dialogue-voice", metavar="NAME",
        help="Quoted speech in another voice, e.g. --dialogue-voice anna (narration keeps --voice).")] = None,
    notes: Annotated[str, typer.Option(
        "--notes", metavar="PLACE",
        help="Where footnotes and endnotes are read: end (a Notes chapter after the last chapter), chapter "
             "(after each chapter's text) or skip (left out, counted in the warnings).")] = "end",
    code: Annotated[str, typer.Option(
        "--code", metavar="MODE",
        help="Code listings: announce (\"Code listing, 12 lines, skipped.\"), skip (left out without a "
             "word) or read (read aloud as text); counted in the warnings either way.")] = "announce",
    keep_front_matter: Annotated[bool, typer.Option(
        "--keep-front-matter", help="Also read the cover, title page, copyright page, contents, index and "
                                    "colophon, left out by default.")] = False,
    max_book_mb: Annotated[Optional[int], typer.Option(
        "--max-book-mb", metavar="MIB",
        help="Largest book to read, in MiB, on disk and unpacked (default 1024 / 512); "
             "raise it for a genuine book refused as too large.")] = None,
    language: Annotated[str, typer.Option(
        "--language", metavar="TAG",
        help="The book's language, e.g. --language en-GB, for its tags and quotation marks (default: "
             "the one the book states, unless its text is clearly another; else its text's).")] = "",
    fail_on_unsupported_script: Annotated[bool, typer.Option(
        "--fail-on-unsupported-script", help="Fail a book holding letters the voice cannot read (Cyrillic, "
                                             "kana, Hangul...) instead of dropping them with a warning.")] = False,
) -> Choices:
    """What is read and how it is pronounced."""
    return {"chapters": tuple(chapters or ()), "lexicon_path": lexicon, "speed": speed,
            "dialogue_voice": dialogue_voice, "notes": notes, "keep_front_matter": keep_front_matter, "code": code,
            "max_book_mb": max_book_mb, "fail_on_unsupported_script": fail_on_unsupported_script,
            "language": language.strip().replace("_", "-")}


def style_choices(
    refine: Annotated[bool, typer.Option(
        "--refine", help="ChatTTS's refine pass: it adds pauses, breaths and fillers to the text "
                         "(default: the text as written).")] = False,
    oral: Annotated[Optional[int], typer.Option(
        "--oral", metavar="0-9", help="Refine pass: filler words, e.g. --oral 2 (implies --refine).")] = None,
    laugh: Annotated[Optional[int], typer.Option(
        "--laugh", metavar="0-2", help="Refine pass: laughter, e.g. --laugh 0 (implies --refine).")] = None,
    pause: Annotated[Optional[int], typer.Option(
        "--pause", metavar="0-7", help="Refine pass: pauses, e.g. --pause 4 (implies --refine).")] = None,
) -> Choices:
    """How the text is styled before it is spoken."""
    from pipeline.delivery import RefineLevels

    return {"refine": refine, "style": RefineLevels(oral=oral, laugh=laugh, pause=pause)}


def takes(**groups: Callable[..., Choices]) -> Callable[[Command], Command]:
    """Add each group's options to a command, which gets the group's choices under its name."""
    def decorate(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True).parameters
        shared = {name: list(inspect.signature(group, eval_str=True).parameters.values())
                  for name, group in groups.items()}
        params = [p for name, p in own.items() if name not in groups]
        params += [p for group_params in shared.values() for p in group_params]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            for name, group in groups.items():
                values[name] = group(**{p.name: values.pop(p.name) for p in shared[name]})
            return command(**values)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run  # type: ignore[return-value]
    return decorate


def job_options(choices: Choices, data_dir: Path, fmt: list[str] | None = None, out: Path | None = None,
                voice: str = DEFAULT_VOICE, priority: int = 0, narrator: str | None = None) -> JobOptions:
    """The options of a command line as a job records them, the lexicon files read (the rest is
    checked by the use case)."""
    fields = dict(choices)
    lexicon = fields.pop("lexicon_path", None)
    options = JobOptions(formats=parse_formats(fmt), out_dir=out.resolve() if out else None, voice=voice,
                         priority=priority, narrator=(narrator or "").strip() or None, **fields)
    return with_user_lexicon(options, data_dir, lexicon)

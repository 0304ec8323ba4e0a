"""How the CLI shows things: durations, JSON, the status of jobs, the inspection of a book.

`status` reads everywhere: on a terminal a table that fits its width (titles and notes shortened
with an ellipsis; `status JOB` has every value in full); piped, tab-separated lines with full
values under a header line, for `cut`, `awk` and spreadsheets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.delivery import DEFAULT_SPEED

if TYPE_CHECKING:  # the status use case reads the database: a command that prints none stays light
    from jobs.status import JobStatus

NO_JOBS = ("no jobs yet: start one with `tts-jobs run BOOK` (here, now) "
           "or `tts-jobs submit BOOK` (for the workers)")
_FIXED = ("id", "state", "done", "audio", "speed", "elapsed", "ETA")
_GAP = 2  # the table's padding between two columns
_MIN_TITLE = 8
_MIN_NOTE = 12


def duration(seconds: float | None) -> str:
    """``H:MM:SS`` (empty for None)."""
    if seconds is None:
        return ""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def print_json(payload: Any) -> None:
    """JSON on stdout in UTF-8, whatever the locale: titles stay readable (``ensure_ascii=False``)."""
    text = json.dumps(payload, ensure_ascii=False, indent=2) + "\n"
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (a test harness): it takes text
        sys.stdout.write(text)
    else:
        buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


# ---------------------------------------------------------------- status


def print_status(statuses: list[JobStatus], detail: bool) -> None:
    """A table on a terminal, tab-separated lines when piped; one job in full with ``detail``."""
    from rich.console import Console

    console = Console()
    on_terminal = sys.stdout.isatty()  # not rich's guess, which FORCE_COLOR turns on when piped
    if not statuses:
        print(NO_JOBS, file=sys.stdout if on_terminal else sys.stderr)
    elif detail:
        _print_detail(statuses[0], console if on_terminal else None)
    elif on_terminal:
        console.print(status_table(statuses, console.width))
    else:
        _print_lines([_row(s) for s in statuses])


def status_view(statuses: list[JobStatus], width: int) -> Any:
    """What `status --watch` shows: the table, or how to start a job."""
    from rich.text import Text

    return status_table(statuses, width) if statuses else Text(NO_JOBS)


def status_table(statuses: list[JobStatus], width: int) -> Any:
    """The jobs as a table ``width`` columns wide at most: the fixed columns whole, the title
    and the note (outputs or error) sharing the rest, shortened with an ellipsis."""
    from rich.cells import cell_len
    from rich.table import Table

    rows = [_row(s) for s in statuses]
    natural = {name: max([cell_len(name)] + [cell_len(r[name]) for r in rows]) for name in rows[0]}
    room = width - sum(natural[name] for name in _FIXED) - _GAP * len(_FIXED)
    title = max(_MIN_TITLE, min(natural["title"], room if room < 2 * _MIN_NOTE + _GAP else room * 3 // 5))
    note = room - title - _GAP
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("id", "title", "state", "done", "audio", "speed", "elapsed", "ETA", "note"):
        if name == "note" and note < _MIN_NOTE:
            continue
        fitted = {"title": title, "note": note}.get(name)
        table.add_column("output / error" if name == "note" else name, no_wrap=True, overflow="ellipsis",
                         width=fitted if fitted is not None and natural[name] > fitted else None,
                         justify="right" if name in ("id", "done") else "left")
    for r in rows:
        table.add_row(*(r[name] for name in ("id", "title", "state", "done", "audio", "speed", "elapsed",
                                              "ETA", "note")[:len(table.columns)]))
    return table


def _row(s: JobStatus) -> dict[str, str]:
    percent = f"{100 * s.sentences_done // s.sentences_total}%" if s.sentences_total else ""
    return {"id": str(s.id), "title": s.title, "state": s.state, "done": percent,
            "audio": duration(s.shown_audio_seconds), "speed": f"{s.x_realtime:.1f}×" if s.x_realtime else "",
            "elapsed": duration(s.elapsed_seconds), "ETA": duration(s.eta_seconds), "note": _note(s),
            "sentences": f"{s.sentences_done}/{s.sentences_total}"}


def _note(s: JobStatus) -> str:
    note = s.error if s.error else ", ".join(s.outputs)
    if s.resume and s.state == "interrupted":
        note = f"{note}; resume: {s.resume}"
    if s.waiting:
        note = s.waiting
    return note


_LINE_COLUMNS = ("id", "title", "state", "sentences", "audio", "speed", "elapsed", "ETA", "note")


def _print_lines(rows: list[dict[str, str]]) -> None:
    print("\t".join("output/error" if name == "note" else name.lower() for name in _LINE_COLUMNS))
    for r in rows:
        print("\t".join(_cell(r[name].removesuffix("×")) for name in _LINE_COLUMNS))


def _cell(value: str) -> str:
    return " ".join(value.split("\t")).replace("\n", " ")


def _detail_fields(s: JobStatus) -> list[tuple[str, str]]:
    fields = [
        ("job", str(s.id)), ("title", s.title), ("state", s.state), ("source", s.source), ("voice", s.voice),
        ("options", describe_options(s.options)),
        ("sentences", f"{s.sentences_done}/{s.sentences_total} ({s.sentences_failed} failed, "
                      f"{s.sentences_hit_limit} cut at the length limit)"),
        ("audio", duration(s.shown_audio_seconds) + (f" (speech {duration(s.audio_seconds)})"
                                                     if s.length_seconds is not None else "")),
        ("speed", f"{s.x_realtime:.1f}× real time" if s.x_realtime else ""),
        ("elapsed", duration(s.elapsed_seconds)), ("ETA", duration(s.eta_seconds)),
        ("folder", s.out_dir or ""), *[("output", path) for path in s.outputs],
        ("error", s.error or ""), ("resume", s.resume or ""), ("waiting", s.waiting or ""), *[("warning", w) for w in s.warnings]]
    return [(key, value) for key, value in fields if value]


def describe_options(shown: dict[str, Any]) -> str:
    """The choices that make this audiobook differ from the defaults, and its narrator tag, on one
    line: ``chapters 1-3, speed 4, dialogue voice anna, lexicon 12 entries (names.txt), refine
    (oral 2), narrator tag Jim Dale``."""
    parts = []
    if shown.get("chapters"):
        parts.append(f"chapters {' '.join(shown['chapters'])}")
    if shown.get("speed", DEFAULT_SPEED) != DEFAULT_SPEED:
        parts.append(f"speed {shown['speed']}")
    if shown.get("dialogue_voice"):
        parts.append(f"dialogue voice {shown['dialogue_voice']}")
    lexicon = shown.get("lexicon") or {}
    if lexicon.get("entries"):
        files = ", ".join(Path(f).name for f in lexicon.get("files", []))
        count = lexicon["entries"]
        entries = f"lexicon {count} {'entry' if count == 1 else 'entries'}"
        parts.append(f"{entries} ({files})" if files else entries)
    if shown.get("refine"):
        style = ", ".join(f"{level} {value}" for level, value in (shown.get("style") or {}).items())
        parts.append(f"refine ({style})" if style else "refine")
    if shown.get("narrator"):
        parts.append(f"narrator tag {shown['narrator']}")
    parts += [f"notes {shown['notes']}"] if shown.get("notes", "end") != "end" else []
    parts += ["front matter kept"] if shown.get("keep_front_matter") else []
    parts += [f"code {shown['code']}"] if shown.get("code", "announce") != "announce" else []
    parts += [f"language {shown['language']}"] if shown.get("language") else []
    return ", ".join(parts)


def _print_detail(s: JobStatus, console: Any | None) -> None:
    """Every value in full: wrapped on a terminal (``console``), tab-separated when piped (None)."""
    from rich.table import Table

    if console is None:
        for key, value in _detail_fields(s):
            print(f"{key}\t{_cell(value)}")
        print("\nchapter\ttitle\tsentences\taudio")
        for c in s.chapters or []:
            print(f"{c['index'] + 1}\t{_cell(c['title'])}\t{c['sentences_done']}/{c['sentences']}\t"
                  f"{duration(c['audio_seconds'])}")
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in _detail_fields(s):
        grid.add_row(key, value)
    console.print(grid)
    if s.chapters:
        console.print(chapter_table(s))


def chapter_table(s: JobStatus) -> Any:
    from rich.table import Table

    table = Table("#", "chapter", "sentences", "audio", box=None, pad_edge=False, header_style="bold")
    for c in s.chapters or []:
        table.add_row(str(c["index"] + 1), c["title"], f"{c['sentences_done']}/{c['sentences']}",
                      duration(c["audio_seconds"]))
    return table


# ---------------------------------------------------------------- inspect


def print_inspection(report: dict[str, Any], sentences: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{report['title']}[/bold] — {', '.join(report['authors']) or 'unknown author'}"
                  f" ({report['language'] or 'language unknown'})")
    if report.get("series"):
        part = f" #{report['series_index']}" if report.get("series_index") else ""
        console.print(f"series: {escape(report['series'])}{part}")
    tagged = [f"{name} {escape(str(report[key]))}" for name, key in
              (("publisher", "publisher"), ("ISBN", "isbn"), ("published", "date")) if report.get(key)]
    tagged += [f"genres {escape('; '.join(report['subjects']))}"] if report.get("subjects") else []
    if tagged:
        console.print(", ".join(tagged))
    table = Table("#", "chapter", "sentences", "characters", "est. duration")
    for c in report["chapters"]:
        table.add_row(str(c["number"]), escape(c["title"]), str(c["sentences"]), str(c["characters"]),
                      duration(c["estimated_seconds"]))
    console.print(table)
    total = sum(c["estimated_seconds"] for c in report["chapters"])
    console.print(f"estimated audio: {duration(total)}")
    lexicon = report["lexicon"]
    if lexicon["book"] or lexicon["user"]:
        console.print(f"pronunciations: {lexicon['book']} from the book, "
                      f"{lexicon['user']} from your lexicons")
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    if sentences:
        _print_sentences(console, report["chapters"])


def _print_sentences(console: Any, chapters: list[dict[str, Any]]) -> None:
    """Each chapter's sentences as the voice is given them; ``»`` marks the dialogue voice's."""
    from rich.markup import escape

    if any(c.get("dialogue_sentences") for c in chapters):
        console.print("\n» read by the dialogue voice")
    for c in chapters:
        console.print(f"\n[bold]{c['number']}. {escape(c['title'])}[/bold]")
        dialogue = set(c.get("dialogue_sentences", ()))
        for number, text in enumerate(c["sentence_texts"]):
            console.print(f"{'» ' if number in dialogue else '  '}{escape(text)}", highlight=False)

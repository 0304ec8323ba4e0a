"""How the CLI shows things: durations, the status table, the inspection, a progress bar."""

from __future__ import annotations

import logging
import sys
from typing import Any

from jobs.status import JobStatus

log = logging.getLogger("tts_jobs")


def duration(seconds: float) -> str:
    """``H:MM:SS``."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def status_table(statuses: list[JobStatus]) -> Any:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table("id", "title", "state", "progress", "sentences", "audio", "speed", "ETA", "output / error")
    for s in statuses:
        bar = ProgressBar(total=max(s.sentences_total, 1), completed=s.sentences_done, width=20)
        speed = f"{s.x_realtime:.1f}× real time" if s.x_realtime else ""
        eta = duration(s.eta_seconds) if s.eta_seconds is not None else ""
        note = s.error if s.error else ", ".join(s.outputs)
        if s.state == "interrupted" and s.resume:
            note = f"{note}; resume: {s.resume}"
        table.add_row(str(s.id), s.title, s.state, bar, f"{s.sentences_done}/{s.sentences_total}",
                      duration(s.audio_seconds), speed, eta, note)
    return table


def print_status(statuses: list[JobStatus], detail: bool) -> None:
    from rich.console import Console

    console = Console()
    console.print(status_table(statuses))
    if detail and statuses and statuses[0].chapters:
        console.print(chapter_table(statuses[0]))


def chapter_table(s: JobStatus) -> Any:
    from rich.table import Table

    table = Table("#", "chapter", "sentences", "audio")
    for c in s.chapters or []:
        table.add_row(str(c["index"] + 1), c["title"], f"{c['sentences_done']}/{c['sentences']}",
                      duration(c["audio_seconds"]))
    return table


def print_inspection(report: dict[str, Any], sentences: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{report['title']}[/bold] — {', '.join(report['authors']) or 'unknown author'}"
                  f" ({report['language'] or 'language unknown'})")
    table = Table("#", "chapter", "sentences", "characters", "est. duration")
    for i, c in enumerate(report["chapters"], 1):
        table.add_row(str(i), c["title"], str(c["sentences"]), str(c["characters"]),
                      duration(c["estimated_seconds"]))
    console.print(table)
    total = sum(c["estimated_seconds"] for c in report["chapters"])
    console.print(f"estimated audio: {duration(total)}")
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if sentences:
        for i, c in enumerate(report["chapters"], 1):
            console.print(f"\n[bold]{i}. {c['title']}[/bold]")
            for text in c["sentence_texts"]:
                console.print(f"  {text}")


class Progress:
    """A progress bar on a terminal; plain log lines otherwise. Use as a context manager; it
    gives the ``update(done, total)`` callback."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._bar: Any = None
        self._task: Any = None
        self._last_logged = -1

    def __enter__(self):  # type: ignore[no-untyped-def]
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self._bar = Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=None)
        return self.update

    def update(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)
            return
        percent = int(100 * done / total) if total else 100
        if percent // 10 != self._last_logged // 10:
            self._last_logged = percent
            log.info("%s: %d/%d sentences (%d%%)", self.label, done, total, percent)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

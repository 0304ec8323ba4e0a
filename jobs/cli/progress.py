"""How long commands (`run`, `retry`, `bulk --wait`) show their progress, and how loud they are.

- On a terminal: one live line on stderr — the stage (reading, speaking, assembling, encoding),
  a bar, sentences or files k/n, the audio produced, the speed, the ETA and the time so far. Log
  lines are printed above it through the same console, never into it.
- Piped: one log line per stage, and one per ~10 % (or when the detail changes) with the ETA.
- ``--quiet``: errors and the final output paths only; ``--verbose``: DEBUG logs.

Dependencies' own progress bars (transformers' "Loading weights", huggingface_hub, tqdm) are
switched off through the variables those libraries read when they are imported.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs import settings
from jobs.cli.output import duration
from jobs.settings import Settings

if TYPE_CHECKING:  # the status use case reads the database: a command that shows no progress stays light
    from jobs.status import StageProgress

log = logging.getLogger("tts_jobs")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOISY_LOGGERS = ("ChatTTS", "httpx", "numba", "urllib3", "transformers", "alembic")
_BAR_WIDTH = 20
UNITS = {"speaking": "sentences", "assembling": "chapters"}  # encoding counts M4B pieces or chapter files


class _Loudness:
    """This process's loudness: ``--quiet`` is given once, before or after the command's name."""

    quiet = False


def configure_logging() -> None:
    """stderr, at ``TTS_JOBS_LOG_LEVEL`` (INFO); warnings of libraries as log lines too, so that
    they also pass above a live progress line."""
    level = Settings.from_env().log_level
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr, format=LOG_FORMAT)
    logging.captureWarnings(True)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def set_loudness(quiet: bool = False, verbose: bool = False) -> None:
    """``--quiet`` (errors only, no progress) or ``--verbose`` (DEBUG); neither leaves things as they are."""
    if quiet:
        _Loudness.quiet = True
        logging.getLogger().setLevel(logging.ERROR)
    elif verbose:
        logging.getLogger().setLevel(logging.DEBUG)


def is_quiet() -> bool:
    return _Loudness.quiet


def silence_dependency_bars() -> None:
    """Before the model's libraries are imported: they decide whether to draw bars at import."""
    settings.silence_dependency_bars()


def describe(event: StageProgress, compact: bool = False) -> str:
    """``speaking 16/32 sentences (50%), 0:01:14 of audio, 80.0× real time, ETA 0:00:01`` for a
    log line; ``compact``: the live line's numbers after its bar, most wanted first."""
    if compact:
        return " · ".join(_parts(event, compact=True))
    return " ".join([event.stage, ", ".join(_parts(event, compact=False))]).strip()


def _parts(event: StageProgress, compact: bool) -> list[str]:
    parts = []
    if event.total and event.stage == "assembling" and event.done == 0:
        parts.append(f"{event.total} {UNITS['assembling']}")
    elif event.total:
        percent = "" if compact else f" ({100 * event.done // event.total}%)"
        parts.append(f"{event.done}/{event.total} {UNITS.get(event.stage, '')}".rstrip() + percent)
    if event.stage == "speaking":
        audio = duration(event.audio_seconds) + (" audio" if compact else " of audio")
        speed = f"{event.x_realtime:.1f}×{'' if compact else ' real time'}" if event.x_realtime else ""
        eta = "no ETA yet" if event.eta_seconds is None else f"ETA {duration(event.eta_seconds)}"
        if event.done >= event.total:
            eta = ""
        parts += [p for p in ([eta, audio, speed] if compact else [audio, speed, eta]) if p]
    if event.detail:
        parts.append(event.detail)
    return parts


@dataclass(frozen=True)
class Finished:
    """What a run made, for its closing summary."""

    title: str
    audio_seconds: float  # the audiobook's length
    folder: str  # where the files are
    x_realtime: float | None = None  # the job's speed, as `status` gives it
    cut: int = 0  # sentences cut at the length limit
    job_id: int | None = None


class ProgressDisplay:
    """The one progress display: a live line on a terminal, log lines when piped, nothing when
    quiet. Use as a context manager; call it with each StageProgress (it is an ``OnStage``)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.began = time.monotonic()
        from jobs.status import StageProgress

        self._event = StageProgress("starting")
        self._lock = threading.Lock()
        self._live: Any = None
        self._console: Any = None
        self._handlers: list[logging.Handler] = []
        self._last_line: tuple[str, int, str] | None = None

    def __enter__(self) -> ProgressDisplay:
        if not is_quiet() and sys.stderr.isatty():
            self._start_live()
        return self

    def __call__(self, event: StageProgress) -> None:
        with self._lock:
            stage_changed = event.stage != self._event.stage
            self._event = event
            if self._live is None and not is_quiet():
                self._log_line(event)
        if self._live is not None and stage_changed:
            self._live.refresh()  # a short stage is shown too, not skipped between two refreshes

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            logging.getLogger().handlers[:] = self._handlers
            self._live = None

    def finish(self, done: Finished) -> None:
        """The closing summary: time, audio length, × real time (the speed `status` gives the job),
        the sentences cut at the length limit, where the files are."""
        if is_quiet():
            return
        took = time.monotonic() - self.began
        speed = f" ({done.x_realtime:.1f}× real time)" if done.x_realtime else ""
        line = f"{done.title}: {duration(done.audio_seconds)} of audio in {duration(took)}{speed}"
        if done.cut:
            line += (f"; {done.cut} sentence{'s' if done.cut > 1 else ''} cut at the length limit "
                     f"(may end mid-word; `tts-jobs status {done.job_id}`)")
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.text import Text

            Console(stderr=True).print(Text.assemble(("done ", "bold green"), line, "\n     files in ",
                                                     (done.folder, "bold")), soft_wrap=True)
        else:
            log.info("done %s; files in %s", line, done.folder)

    def _log_line(self, event: StageProgress) -> None:
        """Piped: a line when the stage or the detail changes, or the count passes a tenth."""
        tenth = 10 * event.done // event.total if event.total else 0
        key = (event.stage, tenth, event.detail)
        if key != self._last_line:
            self._last_line = key
            log.info("%s: %s", self.label, describe(event))

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = self._console = Console(stderr=True)
        self._live = Live(console=console, get_renderable=self._render, transient=True, refresh_per_second=4,
                          redirect_stdout=True, redirect_stderr=True)
        root = logging.getLogger()
        self._handlers = root.handlers[:]
        handler = _ConsoleHandler(console)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.handlers[:] = [handler]
        self._live.start()

    def _render(self) -> Any:
        from rich.cells import cell_len
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            event = self._event
        counted = event.total > 0 and not (event.stage == "assembling" and event.done == 0)
        numbers = describe(event, compact=True)
        elapsed = duration(time.monotonic() - self.began)
        grid = Table.grid(padding=(0, 1), expand=True)  # the numbers give way, with an ellipsis
        grid.add_column(no_wrap=True, width=cell_len(event.stage))
        bar_width = _BAR_WIDTH if self._console.width >= 100 else _BAR_WIDTH // 2
        grid.add_column(no_wrap=True, width=bar_width)
        grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        grid.add_column(no_wrap=True, width=len(elapsed))
        bar = ProgressBar(total=event.total if counted else None, completed=event.done, width=bar_width)
        grid.add_row(Text(event.stage, style="bold cyan"), bar, Text(numbers), Text(elapsed, style="dim"))
        return grid


class _ConsoleHandler(logging.Handler):
    """Log records printed through the live display's console: above the progress line."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        from rich.text import Text

        try:
            self.console.print(Text(self.format(record)), soft_wrap=True)
        except Exception:  # a log line must never break the run it describes
            self.handleError(record)

"""A stage of an embedded run in a Python process of its own, beside the process that feeds the
GPU: that process's threads queue the GPU's work op by op and wait on the interpreter lock at each
op behind any Python beside them (``pipeline/engine/host_threads.py``); reading a 25.8-hour book
in the run's own process (1.5 s) made the engine's load beside it ~0.8 s longer on an H200 host.

The child gets the run's data folder, database and log level, nothing else of its settings; its
log lines come to the run's log at their loggers and levels (``relay``). Its package root goes on
``sys.path`` in its own command line, so it runs from wherever the run's code is.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from jobs.runtime import Runtime, open_runtime
from jobs.settings import Settings, child_environment

log = logging.getLogger(__name__)

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
RELAYED_FORMAT = "%(levelname)s %(name)s: %(message)s"  # one record a line, read back by ``relay``


class Child:
    """A started child (``process``) and the thread that relays its log lines."""

    def __init__(self, settings: Settings, module: str, call: str, **streams: Any) -> None:
        """Run ``module.call`` (``main(7)``, say) in a new Python; ``streams``: its stdin and
        stdout, as ``subprocess.Popen`` takes them."""
        env = child_environment(TTS_JOBS_DATA_DIR=str(settings.data_dir),
                                TTS_JOBS_DATABASE_URL=settings.database_url,
                                TTS_JOBS_LOG_LEVEL=logging.getLevelName(logging.getLogger().getEffectiveLevel()))
        start = f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); import {module} as child; child.{call}"
        self.process: subprocess.Popen[str] = subprocess.Popen(
            [sys.executable, "-c", start], env=env, text=True, stderr=subprocess.PIPE, **streams)
        self.last_words = ""  # the last message it logged (a failure's own words)
        self._relay = threading.Thread(target=self._relay_lines, name=f"{module}-log", daemon=True)
        self._relay.start()

    def wait(self) -> int:
        """Its exit status, once every line it logged is in this process's log. Waits in slices,
        so that Ctrl-C reaches this thread; a stop (any exception here) ends the child too."""
        try:
            while True:
                try:
                    code = self.process.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:
            self.process.terminate()
            raise
        self._relay.join()
        return code

    def _relay_lines(self) -> None:
        self.last_words = relay(self.process.stderr)


def relay(lines: IO[str] | None) -> str:
    """The child's log records into this process's log, at their loggers and levels; a line that
    is not a record (a traceback's) comes as a warning. Returns the last message (or line)."""
    last = ""
    for line in lines or ():
        text = line.rstrip("\n")
        level, _, rest = text.partition(" ")
        name, _, message = rest.partition(": ")
        number = logging.getLevelName(level)
        if isinstance(number, int) and name and message:
            logging.getLogger(name).log(number, message)
            last = message
        elif text.strip():
            log.warning("%s", text)
            last = text
    return last


def child_runtime() -> Runtime:
    """In the child: its log lines in the relayed format, its database (schema as the run left it)."""
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level, stream=sys.stderr, format=RELAYED_FORMAT)
    return open_runtime(settings, upgrade_schema=False)

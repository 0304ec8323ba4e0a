"""What a long measurement prints as it goes, and how it stops: a timestamped progress line and
the one error that ends a run with the reason."""

from __future__ import annotations

import datetime as dt
import time

STARTED = time.monotonic()


def progress(message: str) -> None:
    """A timestamped line, flushed at once: a run killed from outside still shows where it was."""
    now = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[{now} +{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)


class RunFailed(Exception):
    """The measurement cannot go on; the message says why."""

"""Fault injection for the reliability tests: the one place that acts on their two variables
(read with every other in jobs/settings.py). Production never sets them.

``TTS_JOBS_FAULT_AFTER_COMMIT`` — a point name, a comma-separated list, or ``all`` — makes the
process kill itself with SIGKILL right after a commit that a message must follow, once per point
per data directory (a marker file there), so that the worker that takes over is not killed again.
The points: ``submit``, ``ingest``, ``plan``, ``record`` (a batch finished its jobs), ``retry``,
``reconcile`` (the sweeper marked what it resends).

``TTS_JOBS_FAULT_PAUSE`` — ``stage:seconds``, comma-separated — holds a stage (``ingest``,
``plan``, ``synthesize``: a batch claimed, before it is spoken; ``recorded``: a stream's batch
recorded and its progress told; ``assemble``) that long once it has begun, so that a test can kill
its worker, or a server, mid-stage, or see a run's progress between two batches.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from jobs.settings import Settings

FAULT_ENV = "TTS_JOBS_FAULT_AFTER_COMMIT"
PAUSE_ENV = "TTS_JOBS_FAULT_PAUSE"
POINTS = ("submit", "ingest", "plan", "record", "retry", "reconcile")

log = logging.getLogger(__name__)


def after_commit(point: str) -> None:
    """Die here if the tests asked for it (see the module)."""
    settings = Settings.from_env()
    wanted = settings.fault_after_commit
    if not wanted or (point not in wanted.split(",") and wanted != "all"):
        return
    marker = settings.data_dir / f".fault-{point}-done"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    log.critical("fault injection: killing process %s after the %s commit", os.getpid(), point)
    os.kill(os.getpid(), signal.SIGKILL)


def pause(stage: str) -> None:
    """Hold ``stage`` as long as the tests asked (see the module)."""
    for entry in Settings.from_env().fault_pause.split(","):
        name, _, seconds = entry.partition(":")
        if name == stage:
            log.critical("fault injection: holding %s for %s s", stage, seconds)
            time.sleep(float(seconds or 600))

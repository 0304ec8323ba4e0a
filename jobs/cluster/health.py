"""A worker's liveness and readiness, as files a container's health check reads without Python.

Liveness: ``$TMPDIR/tts-jobs-alive/<worker name>`` holds the pid and host of the worker's main
process and is written again at every heartbeat it sends to the broker (every 2 s). It is alive
while that process runs on this host and the file is under a minute old: a file left by a worker
that died (a restarted container keeps /tmp; a shared volume shows another host's) names a pid
that is not running here, so it never passes for a live worker, and a fresh worker's own file is
written at its start, not left from before.

Readiness: ``$TMPDIR/tts-jobs-ready/<worker name>`` holds the pid and host of the pool process
that can do the worker's work now: a GPU worker's once its model has loaded and warmed up (it
has spoken), a CPU worker's once its readers and stitch helpers are up. The pool process removes
it when it stops; a replacement writes it again once loaded. docker-compose.yml checks both.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from pathlib import Path

from pipeline.temp_files import process_alive

log = logging.getLogger(__name__)

ALIVE_FOLDER = "tts-jobs-alive"
READY_FOLDER = "tts-jobs-ready"


def alive_file(worker_name: str) -> Path:
    """The file that worker ``worker_name``'s main process rewrites while it is alive."""
    return Path(tempfile.gettempdir()) / ALIVE_FOLDER / worker_name


def ready_file(worker_name: str) -> Path:
    """The file that says worker ``worker_name`` can do its work."""
    return Path(tempfile.gettempdir()) / READY_FOLDER / worker_name


def stamp(path: Path) -> None:
    """Write this process's pid and host into ``path`` (replaced whole: a reader never sees half)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}")
        part.write_text(f"{os.getpid()} {socket.gethostname()}\n", encoding="utf-8")
        os.replace(part, path)
    except OSError:  # a health file must never stop the worker; the check then reports it
        log.debug("cannot write %s", path, exc_info=True)


def remove(path: Path, only_own: bool = False) -> None:
    """Remove ``path`` (with ``only_own``: only where this process wrote it)."""
    try:
        if only_own and owner(path) != (os.getpid(), socket.gethostname()):
            return
        path.unlink(missing_ok=True)
    except OSError:
        log.debug("cannot remove %s", path, exc_info=True)


def owner(path: Path) -> tuple[int, str] | None:
    """The pid and host written into ``path``, or None if it holds none."""
    try:
        pid, host = path.read_text(encoding="utf-8").split()
        return int(pid), host
    except (OSError, ValueError):
        return None


def clear_for_start(worker_name: str) -> None:
    """Before a worker starts: its own files go (it is neither alive nor ready until it says so),
    and so do files of this host's workers whose process is gone (a name no longer served)."""
    remove(alive_file(worker_name))
    remove(ready_file(worker_name))
    host = socket.gethostname()
    for folder in (alive_file(worker_name).parent, ready_file(worker_name).parent):
        for path in folder.glob("*") if folder.is_dir() else ():
            found = owner(path)
            if found is not None and found[1] == host and not _running(found[0]):
                remove(path)


def report_liveness(worker_name: str) -> None:
    """Stamp the alive file at every heartbeat this process sends to the broker, from now on.
    Connected before the worker starts: Celery looks for receivers when it builds the heartbeat."""
    from celery.signals import heartbeat_sent

    path = alive_file(worker_name)

    def beat(**_: object) -> None:
        stamp(path)

    heartbeat_sent.connect(beat, weak=False)


def _running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() if Path("/proc/self").exists() else process_alive(pid)

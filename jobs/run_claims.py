"""One `tts-jobs run` of a book with the same choices at a time: a claim the operating system holds.

Two runs of one book started at the same instant would each find no live job in the database and
both speak the whole book. So before a run looks, it takes an exclusive lock (``flock``) on a file
named after the book's content and its choices, under the data folder: taking it is atomic, the
second run is refused at once (exit 2, naming the process that reads the book), and the lock goes
with the process however it ends (SIGKILL, power loss), so a killed run never blocks the next.
The database's live-job check stays for runs on other hosts that share a PostgreSQL database.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path
from typing import IO

from jobs.leases import this_process
from pipeline.errors import InputError


class RunClaimed(InputError):
    """Another live `tts-jobs run` holds this book with these choices."""


class RunClaim:
    """A held claim: let go by ``release`` (or by the process ending)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file lets go of its lock
            self._handle = None


def claims_dir(data_dir: Path) -> Path:
    return data_dir / "runs"


def claim_run(data_dir: Path, book_sha256: str, choices_key: str, book: str) -> RunClaim:
    """Take the claim on ``book`` (its content hash) read with ``choices_key``; raises RunClaimed
    naming the process that holds it."""
    folder = claims_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(f"{book_sha256}:{choices_key}".encode()).hexdigest()[:32]
    handle = open(folder / f"{name}.lock", "a+", encoding="utf-8")  # noqa: SIM115 - held until release
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(handle)
        handle.close()
        raise RunClaimed(f"{book}: another `tts-jobs run` is reading this book with these choices right now "
                         f"(process {holder}); wait for it, or stop it first") from None
    handle.truncate(0)
    handle.write(this_process())
    handle.flush()
    os.fsync(handle.fileno())
    return RunClaim(handle)


def _holder(handle: IO[str]) -> str:
    """The process named in a held claim: the holder writes its name just after it takes the lock,
    so a run refused in that instant waits for the name (a second at most)."""
    deadline = time.monotonic() + 1.0
    while True:
        handle.seek(0)
        holder = handle.read().strip()
        if holder or time.monotonic() > deadline:
            return holder or "another process"
        time.sleep(0.02)

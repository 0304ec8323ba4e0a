"""Turning OS errors into the fix a user should apply (shared by every writer in this package)."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path

from pipeline.errors import AssemblyError


def os_error_fix(exc: OSError) -> str:
    """The advice that goes with an OSError in an AssemblyError message."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full: free some space and run the job again"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check that the directory is writable by this user"
    return "check the disk and run the job again"


def remove_quietly(path: Path) -> None:
    """Delete a temporary file if it is there; never raise (cleanup must not hide the real error)."""
    with contextlib.suppress(OSError):
        path.unlink()


def make_dirs(*directories: Path) -> None:
    """Create each directory (and its parents) if missing; AssemblyError names the one that cannot be."""
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AssemblyError(
                f"{directory}: cannot create the directory: {exc.strerror} "
                "(check the path and its permissions)"
            ) from exc

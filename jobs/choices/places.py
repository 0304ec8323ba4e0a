"""Where a command will write: a folder it makes (`--out`) or a file it writes (`preview -o`,
`voice new --sample`), checked before anything is recorded or any model loads, so that a path
that cannot be written ends with one line, not with a failed job or a lost synthesis."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.errors import OptionError


def check_out_folder(path: Path, option: str = "--out") -> None:
    """Raises OptionError when the folder ``path`` cannot be made or written in: it is a file, or
    the nearest folder above it that exists is no folder or not writable."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        raise OptionError(f"{option} {path}: a file, not a folder (give a folder for the audiobooks)")
    _writable(_nearest_existing(path), f"{option} {path}")


def check_new_file(path: Path, option: str) -> None:
    """Raises OptionError when no file can be written at ``path``: it is a folder, or its folder
    is missing or not writable."""
    path = path.expanduser()
    if path.is_dir():
        raise OptionError(f"{option} {path}: a folder (give a file name, e.g. {path / 'sample.wav'})")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise OptionError(f"{option} {path}: no folder {folder} (make it first, or write the file elsewhere)")
    _writable(folder, f"{option} {path}")


def _nearest_existing(path: Path) -> Path:
    for folder in (path, *path.absolute().parents):
        if folder.exists():
            return folder
    return Path("/")


def _writable(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise OptionError(f"{what}: {folder} is a file, not a folder (give a path under a folder)")
    read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    if read_only or not os.access(folder, os.W_OK | os.X_OK):
        raise OptionError(f"{what}: {folder} is not writable (give a folder you may write in)")

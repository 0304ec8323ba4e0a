"""One folder per book under an output folder: ``OUT/<Author>/<Title>/`` — the layout that
Audiobookshelf and Plex scan — for `run`, `submit` and `bulk` alike.

A book's folder holds a marker file naming the book's content (its SHA-256). A folder is claimed
with an atomic ``mkdir``: the same book run again finds its own marker and writes into its own
folder; a different book with the same author and title (another edition, a different file with
the same metadata) gets ``<Title> (<first 8 hex digits of its hash>)`` instead, so two books never
share a folder and never overwrite each other's files.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import TtsJobsError
from storage.artifacts import atomic_write_bytes

UNKNOWN_AUTHOR = "Unknown Author"
UNTITLED = "Audiobook"
MARKER = ".tts-jobs-book.json"


def default_out_root(data_dir: Path) -> Path:
    """Where audiobooks land without ``--out``: ``$TTS_JOBS_DATA_DIR/audiobooks``."""
    return (data_dir / "audiobooks").absolute()


def author_folder_name(authors: Sequence[str]) -> str:
    """The author level: the book's authors joined by " & " (as Audiobookshelf reads them)."""
    from pipeline.audio.names import safe_stem

    return safe_stem(" & ".join(a.strip() for a in authors if a.strip()), fallback=UNKNOWN_AUTHOR)


def claim_book_folder(out_root: Path, title: str, authors: Sequence[str], sha256: str) -> tuple[Path, bool]:
    """The book's own folder under ``out_root``, created if needed. Returns (folder, created).

    Raises TtsJobsError when the folder cannot be made (naming the folder and the fix)."""
    from pipeline.audio.names import safe_stem

    parent = out_root / author_folder_name(authors)
    stem = safe_stem(title, fallback=UNTITLED)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for name in (stem, f"{stem} ({sha256[:8]})"):
            folder = parent / name
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                _mark(folder, sha256, title, authors)
                return folder, True
            if book_in(folder) == sha256:
                return folder, False
        folder = parent / f"{stem} ({sha256[:16]})"  # a stranger's folder holds the short name too
        folder.mkdir(exist_ok=True)
        _mark(folder, sha256, title, authors)
        return folder, False
    except OSError as exc:
        raise TtsJobsError(f"{parent}: cannot create the book's folder ({exc.strerror or exc}): "
                           "pass an --out folder this user can write to") from exc


def release_book_folder(folder: Path) -> None:
    """Undo a claim whose job was withdrawn: the folder goes if it holds nothing but its marker
    (one with the book's files from an earlier run stays as it is)."""
    with contextlib.suppress(OSError):
        if {p.name for p in folder.iterdir()} <= {MARKER}:
            (folder / MARKER).unlink(missing_ok=True)
            folder.rmdir()


def book_in(folder: Path) -> str | None:
    """The SHA-256 of the book whose folder this is (None: no marker, or not a book folder)."""
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError, AttributeError):
        return None


def _mark(folder: Path, sha256: str, title: str, authors: Sequence[str]) -> None:
    marker = {"sha256": sha256, "title": title, "authors": list(authors)}
    atomic_write_bytes(folder / MARKER, json.dumps(marker, ensure_ascii=False).encode("utf-8"))

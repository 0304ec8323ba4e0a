"""One folder per book under an output folder: ``OUT/<Author>/<Title>/`` — the layout that
Audiobookshelf and Plex scan — for `run`, `submit` and `bulk` alike. A folder holds one audiobook:
the book read with other choices than the defaults (``--chapters 1``, another voice or speed...)
is another edition, in ``<Title> (<what differs>)`` beside it, so that no run replaces the
audiobook another set of choices made.

A book's folder holds a marker file naming the book's content (its SHA-256). A folder is claimed
with an atomic ``mkdir``: the same book run again finds its own marker and writes into its own
folder; a different book with the same author and title (another edition, a different file with
the same metadata) gets ``<Title> (<first 8 hex digits of its hash>)`` instead, so two books (or two
editions whose choices read alike) never share a folder and never overwrite each other's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.orm import Session

from jobs.choices.options import JobOptions
from jobs.choices.voices import DEFAULT_VOICE
from pipeline.delivery import DEFAULT_SPEED
from pipeline.errors import AssemblyError, TtsJobsError
from storage import repo
from storage.artifacts import atomic_write_bytes
from storage.models import Job

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


def edition_label(options: JobOptions) -> str:
    """What makes this edition of a book differ from the default one, for its folder's name:
    ``chapters 1, speed 4, voice anna``; "" for the defaults. Formats, the output folder and the
    priority are no part of it (the same audiobook in another place or format)."""
    parts = [f"chapters {' '.join(options.chapters)}"] if options.chapters else []
    parts += [f"speed {options.speed}"] if options.speed != DEFAULT_SPEED else []
    parts += [f"voice {options.voice}"] if options.voice != DEFAULT_VOICE else []
    parts += [f"dialogue voice {options.dialogue_voice}"] if options.dialogue_voice else []
    parts += [f"lexicon {len(options.lexicon)}"] if options.lexicon else []
    parts += ["refined"] if options.refine else []
    parts += [f"narrator {options.narrator}"] if options.narrator else []
    parts += [f"notes {options.notes}"] if options.notes != "end" else []
    parts += ["front matter"] if options.keep_front_matter else []
    parts += [f"code {options.code}"] if options.code != "announce" else []
    parts += [f"language {options.language}"] if options.language else []
    return ", ".join(parts)


def edition_key(options: JobOptions) -> str:
    """The choices that make an edition, as a digest ("" for the default edition): two editions
    whose labels read alike (two lexicons of as many entries) still get two folders."""
    if not edition_label(options):
        return ""
    chosen = {k: v for k, v in options.to_json().items()
              if k not in ("formats", "out_dir", "priority", "max_book_mb", "fail_on_unsupported_script",
                           "lexicon_files")}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True, default=str).encode()).hexdigest()


def claim_book_folder(out_root: Path, title: str, authors: Sequence[str], sha256: str,
                      edition: JobOptions | None = None) -> tuple[Path, bool]:
    """The folder of this edition of the book under ``out_root``, created if needed: ``<Title>``
    for the default choices, ``<Title> (<what differs>)`` for others. Returns (folder, created).

    Raises TtsJobsError when the folder cannot be made (naming the folder and the fix)."""
    from pipeline.audio.names import safe_stem

    parent = out_root / author_folder_name(authors)
    label = edition_label(edition) if edition is not None else ""
    key = edition_key(edition) if edition is not None else ""
    stem = safe_stem(f"{title} ({label})" if label else title, fallback=UNTITLED)
    owner = (sha256, key)
    short = hashlib.sha256(f"{sha256}:{key}".encode()).hexdigest() if key else sha256
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for name in (stem, f"{stem} ({short[:8]})"):
            folder = parent / name
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                _mark(folder, owner, title, authors, label)
                return folder, True
            if _owner(folder) == owner:
                return folder, False
        folder = parent / f"{stem} ({short[:16]})"  # a stranger's folder holds the short name too
        folder.mkdir(exist_ok=True)
        _mark(folder, owner, title, authors, label)
        return folder, False
    except OSError as exc:
        raise TtsJobsError(f"{parent}: cannot create the book's folder ({exc.strerror or exc}): "
                           "pass an --out folder this user can write to") from exc


def format_folders(folder: Path, formats: Sequence[str]) -> tuple[tuple[str, Path], ...]:
    """One audiobook per folder: a library lists every folder of audio as a book, so the M4B (or
    the first per-chapter format asked for) stays in the book's ``folder`` and each other
    per-chapter format gets a sibling named after it, ``<Title> (MP3)``, with the book's marker.
    Returns (format, folder) of those siblings, created; raises AssemblyError when one cannot be."""
    from pipeline.audio.assembly_types import CHAPTER_FORMATS

    audio = [f for f in formats if f == "m4b" or f in CHAPTER_FORMATS]
    others = [f for f in audio if f != ("m4b" if "m4b" in audio else audio[0])] if audio else []
    siblings = tuple((f, folder.with_name(f"{folder.name} ({f.upper()})")) for f in others)
    try:
        for _, sibling in siblings:
            sibling.mkdir(exist_ok=True)
            if (folder / MARKER).is_file() and not (sibling / MARKER).is_file():
                atomic_write_bytes(sibling / MARKER, (folder / MARKER).read_bytes())
    except OSError as exc:
        raise AssemblyError(f"{folder.parent}: cannot create the folder of a second format "
                           f"({exc.strerror or exc}): pass an --out folder this user can write to") from exc
    return siblings


def release_book_folder(folder: Path) -> None:
    """Undo a claim whose job was withdrawn: the folder goes if it holds nothing but its marker
    (one with the book's files from an earlier run stays as it is)."""
    with contextlib.suppress(OSError):
        if {p.name for p in folder.iterdir()} <= {MARKER}:
            (folder / MARKER).unlink(missing_ok=True)
            folder.rmdir()


def disown_replaced(session: Session, job: Job) -> None:
    """Earlier jobs of this book whose files ``job`` has just made anew (`run --fresh`, `retry`
    of an older job) no longer name them as theirs, and say by whom they were replaced: `status`
    of a job describes only files that are still what it made. The caller commits."""
    made = set(job.outputs)
    for other in repo.find_jobs_by_sha256(session, job.source_sha256):
        replaced = [path for path in other.outputs or () if path in made]
        if other.id != job.id and replaced:
            other.outputs = [path for path in other.outputs if path not in made]
            other.warnings = [*other.warnings, f"its files were made again by job {job.id}, with the "
                              f"same choices: {', '.join(replaced)}"]


def book_in(folder: Path) -> str | None:
    """The SHA-256 of the book whose folder this is (None: no marker, or not a book folder)."""
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError, AttributeError):
        return None


def _owner(folder: Path) -> tuple[str | None, str]:
    """(the book's SHA-256, its edition's key) of a book folder; a marker of a folder claimed
    before editions had folders of their own is the default edition's."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return marker.get("sha256"), marker.get("edition") or ""
    except (OSError, ValueError, AttributeError):
        return None, ""


def _mark(folder: Path, owner: tuple[str, str], title: str, authors: Sequence[str], label: str) -> None:
    marker = {"sha256": owner[0], "title": title, "authors": list(authors)}
    if owner[1]:
        marker |= {"edition": owner[1], "choices": label}
    atomic_write_bytes(folder / MARKER, json.dumps(marker, ensure_ascii=False).encode("utf-8"))

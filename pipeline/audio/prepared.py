"""The chapters prepared ahead (:mod:`pipeline.audio.ahead`): what each one is made of, how a
list of them is kept in the work directory for the process that assembles the book (a CPU
worker's task, the run's after its child's), and how the assembly checks that they still are
what the book is now (a chapter spoken again since is assembled anew).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.audio.aac import AacChapterPlan, AacPiece
from pipeline.audio.assembly_types import ChapterAudio
from pipeline.audio.levelling import Loudness
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter
from pipeline.audio.tags import TrackTags

log = logging.getLogger(__name__)

PREPARED_FILE = "prepared.pickle"  # in the work directory: the chapters prepared there so far
UNDER_WAY_FILE = "under-way"  # in the work directory: the stretch being encoded, and every M4B piece to its end


@dataclass(frozen=True)
class PreparedChapter:
    """One chapter assembled ahead, and what it was made from."""

    audio: ChapterAudio  # its sentences as they were when prepared (the assembly checks them)
    measured: MeasuredChapter
    loudness: Loudness
    stitched: StitchedChapter
    pieces: tuple[AacPiece, ...] = ()  # its M4B pieces (``chapter`` = its position in the book)
    plans: tuple[AacChapterPlan, ...] = ()
    aac_paths: tuple[Path, ...] = ()
    frames: tuple[int, ...] = ()  # AAC frames each piece came to
    files: tuple[tuple[str, Path], ...] = ()  # (format, its finished file in the work directory)
    tags: TrackTags | None = None  # what those files are tagged with (the cover left out)
    readalong: Path | None = None  # its audio for a read-along EPUB
    stamps: tuple[tuple[int, int, int], ...] = ()  # its sentence files' (inode, mtime_ns, size) then

    @property
    def encoded(self) -> bool:
        return bool(self.pieces)

    def file_for(self, audio_format: str, tags: TrackTags) -> Path | None:
        """Its file in ``audio_format``, where one was made with these ``tags`` and is still there."""
        made = dict(self.files).get(audio_format)
        same_tags = self.tags is not None and self.tags == replace(tags, cover=None)
        return made if made is not None and same_tags and made.is_file() else None


@dataclass(frozen=True)
class LaidOut:
    """A stretch of chapters measured, stitched, levelled and cut into M4B pieces with their AAC
    plans (``BookAhead.lay_out``): what its encodes need."""

    first: int  # the position of its first chapter in the book
    chapters: tuple[ChapterAudio, ...]
    stamps: tuple[tuple[tuple[int, int, int], ...], ...]
    measured: tuple[MeasuredChapter, ...]
    loudness: tuple[Loudness, ...]
    stitched: tuple[StitchedChapter, ...]
    pieces: tuple[AacPiece, ...]
    plans: tuple[AacChapterPlan, ...]
    began: float  # time.monotonic() when its laying out began
    laid_out_seconds: float


def sentence_stamps(chapter: ChapterAudio) -> tuple[tuple[int, int, int], ...]:
    """Each sentence file's inode, modification time and size: a sentence spoken again into the
    same path (a retried batch; written to a new file, renamed into place) changes them."""
    stamps = []
    for sentence in chapter.sentences:
        try:
            stat = os.stat(sentence.path)
        except OSError:
            stamps.append((-1, -1, -1))
            continue
        stamps.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


def still_the_same(chapters: Sequence[ChapterAudio], prepared: Sequence[PreparedChapter]) -> list[PreparedChapter]:
    """The longest prefix of ``prepared`` made of the same sentences as the chapters now are, their
    files unchanged since (a chapter spoken again since, say by a retried batch, is assembled
    anew, and so is every one after it)."""
    same = []
    for chapter, ahead in zip(chapters, prepared):
        files = (ahead.stitched.wav_path, *ahead.aac_paths, *(() if ahead.readalong is None else (ahead.readalong,)))
        if ahead.audio != chapter or ahead.stamps != sentence_stamps(chapter) or \
                not all(path.is_file() for path in files):
            break
        same.append(ahead)
    return same


def save_prepared(work_dir: Path, prepared: Sequence[PreparedChapter]) -> None:
    """Keep the list of chapters prepared in ``work_dir`` there, for the process that assembles the
    book. Written whole or not at all (renamed into place): a reader never sees half a list."""
    partial = work_dir / f".{PREPARED_FILE}.{os.getpid()}"
    partial.write_bytes(pickle.dumps(list(prepared), protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(partial, work_dir / PREPARED_FILE)


def load_prepared(work_dir: Path) -> list[PreparedChapter]:
    """The chapters ``save_prepared`` kept in ``work_dir`` (none when there is no list or it cannot
    be read: the assembly then does every chapter itself). The file is the project's own, written
    in this data directory by its own workers, never taken from a book."""
    try:
        prepared = pickle.loads((work_dir / PREPARED_FILE).read_bytes())
    except FileNotFoundError:
        return []
    except Exception as exc:  # noqa: BLE001 - an unreadable list only costs the chapters' redoing
        log.warning("%s: the chapters prepared ahead could not be read (%s); assembling them anew",
                    work_dir, exc)
        return []
    return [c for c in prepared if isinstance(c, PreparedChapter)] if isinstance(prepared, list) else []


def save_under_way(work_dir: Path, through: int, pieces: Sequence[AacPiece] | None = None) -> None:
    """Say in ``work_dir`` that a stretch ending before position ``through`` is being encoded, and
    the M4B pieces of every chapter before that (None: none are encoded ahead): an assembly that
    begins meanwhile lays out and encodes the chapters from there on while it waits
    (:mod:`pipeline.audio.layout`, :mod:`pipeline.audio.early_m4b`). Renamed into place: a reader
    sees the whole of one."""
    said = {"through": through,
            "pieces": None if pieces is None else [[p.samples, p.trailing_silence] for p in pieces]}
    partial = work_dir / f".{UNDER_WAY_FILE}.{os.getpid()}"
    partial.write_text(json.dumps(said))
    os.replace(partial, work_dir / UNDER_WAY_FILE)


def under_way(work_dir: Path) -> int:
    """How many chapters the preparation in ``work_dir`` will have prepared once the stretch it
    is encoding is kept (``save_under_way``; 0 when none was said). A hint only: the list kept
    (``load_prepared``) decides what is taken."""
    return _said(work_dir).get("through", 0)


def under_way_pieces(work_dir: Path, through: int) -> list[tuple[int, int]] | None:
    """(samples, trailing silence) of every M4B piece before position ``through``, as the
    preparation in ``work_dir`` said them; None when it said none, or for another position."""
    said = _said(work_dir)
    if said.get("through") != through or not isinstance(said.get("pieces"), list):
        return None
    return [(int(samples), int(silence)) for samples, silence in said["pieces"]]


def _said(work_dir: Path) -> dict:
    try:
        said = json.loads((work_dir / UNDER_WAY_FILE).read_text())
        return said if isinstance(said, dict) and isinstance(said.get("through"), int) else {}
    except (OSError, ValueError):
        return {}

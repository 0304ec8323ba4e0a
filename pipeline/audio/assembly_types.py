"""The assembly stage's boundary types: sentence and chapter audio in, options, reports out; and
``SUPPORTED_FORMATS``, the one list of output formats (all re-exported by :mod:`pipeline.audio`).

It imports only the standard library and :mod:`pipeline.errors`, so that what needs only the
formats or the options (the command line's option checks) depends on nothing else of the stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import AssemblyError

SUPPORTED_FORMATS = ("m4b", "mp3", "ogg", "flac", "wav")


@dataclass(frozen=True)
class SentenceAudio:
    """One synthesised sentence on disk."""

    path: Path
    paragraph_index: int  # -1 = the chapter title


@dataclass(frozen=True)
class ChapterAudio:
    """One chapter's sentences in reading order."""

    index: int  # 0-based position in the book
    title: str
    sentences: tuple[SentenceAudio, ...]


@dataclass(frozen=True)
class AssemblyOptions:
    """How the audiobook is put together and encoded."""

    formats: tuple[str, ...] = ("m4b",)  # any of m4b, mp3, ogg (Opus), flac, wav
    bitrate: str = "64k"  # for the lossy formats (m4b/AAC, mp3, ogg/Opus)
    sentence_pause_ms: int = 300
    paragraph_pause_ms: int = 700
    title_pause_ms: int = 1000  # after the chapter title, before the first body sentence
    chapter_pause_ms: int = 2000  # after each chapter but the last
    target_lufs: float = -18.0  # integrated loudness of the whole book (EBU R128)
    true_peak_db: float = -1.5  # ceiling, dBTP
    normalize_loudness: bool = True
    trim_silence: bool = True
    split_hours: float | None = None  # M4B only: split into parts of at most this many hours
    narrator: str = ""
    threads: int = 0  # parallel stitching/encoding jobs; 0 = one per available core
    stitch_in_processes: bool = True  # chapters stitched in helper processes (False: threads here)

    def __post_init__(self) -> None:
        # Normalise: "MP3" or a bare string work, and a format asked twice is written once (two
        # encoders racing for one file name would be a bug, not a feature).
        formats = (self.formats,) if isinstance(self.formats, str) else self.formats
        object.__setattr__(self, "formats", tuple(dict.fromkeys(f.lower() for f in formats)))
        unknown = [f for f in self.formats if f not in SUPPORTED_FORMATS]
        if unknown or not self.formats:
            raise AssemblyError(
                f"unsupported output format(s) {unknown or '(none)'} "
                f"(choose from {', '.join(SUPPORTED_FORMATS)})"
            )
        pauses = (self.sentence_pause_ms, self.paragraph_pause_ms, self.title_pause_ms, self.chapter_pause_ms)
        if min(pauses) < 0:
            raise AssemblyError(f"negative pause in {pauses} ms (pauses must be 0 or more)")
        if self.split_hours is not None and self.split_hours <= 0:
            raise AssemblyError(f"split_hours={self.split_hours} (must be positive, or None for one file)")


@dataclass(frozen=True)
class ChapterReport:
    """Where a chapter ended up. For a split M4B, ``start_seconds`` counts from the book's start."""

    title: str
    start_seconds: float
    seconds: float


@dataclass(frozen=True)
class AssemblyReport:
    """What assembly produced."""

    outputs: tuple[Path, ...]
    chapters: tuple[ChapterReport, ...]
    total_seconds: float
    sentence_seconds: float  # speech, after trimming
    pause_seconds: float  # inserted pauses
    gain_db: float = 0.0  # the one gain applied to the whole book for loudness
    measured_lufs: float = float("-inf")  # the book's integrated loudness before that gain
    limiter: bool = False  # whether a peak limiter was needed to respect the true-peak ceiling

"""The assembly stage's boundary types: sentence and chapter audio in, options, reports out; and
``SUPPORTED_FORMATS``, the one list of output formats (all re-exported by :mod:`pipeline.audio`).

It imports only the standard library and :mod:`pipeline.errors`, so that what needs only the
formats or the options (the command line's option checks) depends on nothing else of the stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import AssemblyError

CHAPTER_FORMATS = ("mp3", "ogg", "flac", "wav")  # audio written as one file per chapter
# Read-along outputs, made from the same run: an EPUB 3 whose text is highlighted as it is read
# (pipeline/readalong), and subtitles for the audio files
READALONG_FORMATS = ("epub", "srt", "vtt")
SUPPORTED_FORMATS = ("m4b", *CHAPTER_FORMATS, *READALONG_FORMATS)

OnStep = Callable[[str, int, int], None]
"""Assembly's progress for a display, as ``(stage, done, total)``: ``assembling`` 0/n chapters as
measuring starts and n/n once they are stitched, then ``encoding`` k/n as each encode (an M4B
piece or a chapter's file) ends. Called from the encoding threads: it must be thread-safe."""


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
    target_lufs: float = -18.0  # integrated loudness of every chapter (EBU R128)
    true_peak_db: float = -1.5  # ceiling, dBTP
    normalize_loudness: bool = True
    trim_silence: bool = True
    split_hours: float | None = None  # M4B only: split into parts of at most this many hours
    narrator: str = ""
    threads: int = 0  # parallel stitching/encoding jobs; 0 = one per available core
    stitch_in_processes: bool = True  # chapters stitched in helper processes (False: threads here)
    # A book of fewer sentences is stitched in threads: a helper costs ~0.5 CPU-s to start, more
    # than threads lose to the GIL on a few hundred sentences.
    helpers_from_sentences: int = 400
    # (format, folder) of a per-chapter audio format written outside the book's folder: one
    # audiobook per folder (jobs/book_folders.format_folders); the rest go to the book's folder
    format_folders: tuple[tuple[str, Path], ...] = ()

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

    @property
    def chapter_formats(self) -> tuple[str, ...]:
        """The per-chapter audio formats asked for."""
        return tuple(f for f in self.formats if f in CHAPTER_FORMATS)

    def folder_for(self, audio_format: str, out_dir: Path) -> Path:
        """Where the files of ``audio_format`` go: its own folder, else the book's ``out_dir``."""
        return dict(self.format_folders).get(audio_format, out_dir)

    @property
    def readalong_audio(self) -> bool:
        """Whether a read-along EPUB is asked for: its chapters' audio is encoded too (AAC in MP4)."""
        return "epub" in self.formats


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
    gain_db: float = 0.0  # the chapters' loudness gains, averaged by their length
    measured_lufs: float = float("-inf")  # the book's integrated loudness before the gains
    limiter: bool = False  # whether a peak limiter was needed (on any chapter) for the true-peak ceiling
    timeline: tuple[ChapterTimeline, ...] = ()  # where every sentence's speech lies
    m4b_stretches: tuple[M4bStretch, ...] = ()  # where each stretch of a chapter plays in the M4B(s)
    readalong_audio: tuple[Path, ...] = ()  # per chapter, for a read-along EPUB (in the work directory)


@dataclass(frozen=True)
class SpokenSpan:
    """One sentence's speech in its chapter's audio: samples ``start:end``."""

    path: str  # the sentence WAV it was cut from (which tells the sentence)
    start: int
    end: int


@dataclass(frozen=True)
class ChapterTimeline:
    """A chapter's audio as every per-chapter file holds it: its sentences' speech, in order."""

    index: int
    start: int  # its first sample with the chapters back to back (the report's chapter starts)
    samples: int  # its length, the pause after it included
    spans: tuple[SpokenSpan, ...]  # sentences without speech are left out


@dataclass(frozen=True)
class M4bStretch:
    """Where samples ``start:`` of a chapter play in an M4B: from ``at`` on, to the next stretch.
    A chapter encoded whole is one stretch; one cut into pieces (``aac.cut_into_pieces``), one per
    piece. ``at`` counts the AAC frames really written, as the M4B's chapter marks do."""

    path: Path  # the M4B (a part of the book, with ``split_hours``)
    chapter: int  # the chapter's index in the book
    start: int
    at: int

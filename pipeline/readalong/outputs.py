"""The read-along outputs of one assembled book, written beside its audio: the timings file
(always), subtitles (``srt``, ``vtt``) and the read-along EPUB (``epub``), as the formats ask."""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.audio.assembly_types import AssemblyOptions, AssemblyReport
from pipeline.audio.names import numbered_names, safe_stem
from pipeline.ingest.options import IngestOptions
from pipeline.readalong.edition import READALONG_DIR
from pipeline.readalong.epub import write_readalong_epub
from pipeline.readalong.subtitles import subtitle_files
from pipeline.readalong.timings import BookTimings, book_timings, timings_json, write_text_file
from pipeline.types import Book, Sentence

log = logging.getLogger(__name__)

TIMINGS_SUFFIX = ".timings.json"


@dataclass(frozen=True)
class ReadAlong:
    outputs: tuple[Path, ...]  # the read-along files asked for (EPUB, subtitles)
    timings: Path  # the timings file
    sentences: int  # sentences timed
    unmarked: int  # sentences with a place in the book that the EPUB could not mark


def write_readalong(
    book: Book,
    sentences: Mapping[str, Sentence],
    report: AssemblyReport,
    options: AssemblyOptions,
    out_dir: Path,
    *,
    reading: IngestOptions,
    identifier: str,
) -> ReadAlong:
    """Write the book's timings, and its subtitles and read-along EPUB where ``options`` ask.

    Args:
        book: the book as ingestion read it, its sentences found with their written words.
        sentences: the sentence each sentence WAV holds, by the WAV's path.
        report: the audio assembly's (its timeline, M4B placements and read-along audio).
        options: the formats asked for, and the narrator.
        out_dir: where the audio was written.
        reading: the options the book was read with.
        identifier: the book's identifier, for an EPUB made from TXT, Markdown or HTML.
    """
    titles = {chapter.index: chapter.title for chapter in book.chapters}
    timings = book_timings(report.timeline, report.m4b_stretches, titles, sentences)
    stem = safe_stem(book.metadata.title, fallback="Audiobook")
    outputs: list[Path] = []
    fragments: dict[tuple[int, int], str] = {}
    unmarked = 0
    if "epub" in options.formats:
        epub = write_readalong_epub(
            book,
            timings,
            report.readalong_audio,
            epub_path(out_dir, stem),
            reading=reading,
            identifier=identifier,
            narrator=options.narrator,
        )
        outputs.append(epub.path)
        fragments, unmarked = epub.fragments, epub.unmarked
        if unmarked:
            log.warning(
                "%r: %d sentences could not be marked in the read-along EPUB; each is heard within "
                "a neighbour's highlight",
                book.metadata.title,
                unmarked,
            )
    subtitle_formats = [f for f in options.formats if f in ("srt", "vtt")]
    if subtitle_formats:
        outputs += _write_subtitles(timings, subtitle_formats, options, out_dir, stem)
    path = write_text_file(out_dir / f"{stem}{TIMINGS_SUFFIX}", timings_json(timings, fragments))
    return ReadAlong(tuple(outputs), path, timings.sentence_count, unmarked)


def epub_path(out_dir: Path, stem: str) -> Path:
    """``<Title>.epub``, unless an EPUB of that name is there that is no read-along edition of ours
    (the book itself, kept beside its audiobook as libraries do): then ``<Title>.read-along.epub``."""
    path = out_dir / f"{stem}.epub"
    if not path.exists():
        return path
    try:
        with zipfile.ZipFile(path) as archive:
            ours = any(name.endswith(f"/{READALONG_DIR}/readalong.css") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        ours = False
    if ours:
        return path
    log.warning("%s is not a read-along EPUB of tts-jobs; the read-along edition is written beside it", path)
    return out_dir / f"{stem}.read-along.epub"


def _write_subtitles(
    timings: BookTimings, formats: Sequence[str], options: AssemblyOptions, out_dir: Path, stem: str
) -> list[Path]:
    chapter_names: list[str] = []
    chapter_folder = out_dir
    if options.chapter_formats:  # the per-chapter audio's names, less their extension; beside that audio
        titles = [chapter.title for chapter in timings.chapters]
        chapter_names = [Path(name).stem for name in numbered_names(titles, options.chapter_formats[0])]
        chapter_folder = options.folder_for(options.chapter_formats[0], out_dir)
    files = subtitle_files(timings, formats, chapter_names, stem)
    return [write_text_file((chapter_folder if Path(name).stem in chapter_names else out_dir) / name, text)
            for name, text in files.items()]

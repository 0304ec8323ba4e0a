"""Every spoken sentence's time span and its words as written: the data a read-along edition, its
subtitles and anyone else (a player, a search index) are made from.

Times are in samples at ``SAMPLE_RATE``, exact: in the chapter's audio (as every per-chapter file
and the read-along EPUB's chapter audio hold it), and in the book's timeline: the M4B's where one is
written (placed by the AAC frames it really holds, as its chapter marks are), else the chapters
back to back. A sentence's span is its speech, after trimming; the pause after it is not in it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.audio.assembly_types import ChapterTimeline, M4bStretch
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE, Sentence, WrittenSpan


@dataclass(frozen=True)
class SentenceTiming:
    """One spoken sentence: where it is heard and what the book writes for it."""

    index: int  # its place in its chapter (as the text stage numbered it)
    paragraph: int  # -1: the chapter's title
    spoken: str  # what the voice read
    written: WrittenSpan | None  # None: words the reader supplies ('Note 1.')
    start: int  # its speech in the chapter's audio, samples start:end
    end: int
    book_start: int  # the same in the book's timeline
    book_end: int

    @property
    def shown(self) -> str:
        """The words to show for it: as written, else as spoken."""
        return self.written.text if self.written is not None else self.spoken


@dataclass(frozen=True)
class ChapterTiming:
    index: int
    title: str
    samples: int  # the chapter's audio, the pause after it included
    book_start: int  # where it starts in the book's timeline
    m4b: str  # the M4B (part) file whose timeline ``book_*`` count in; '' for the chapters back to back
    sentences: tuple[SentenceTiming, ...]  # in reading order; sentences without speech are left out


@dataclass(frozen=True)
class BookTimings:
    chapters: tuple[ChapterTiming, ...]

    @property
    def sentence_count(self) -> int:
        return sum(len(chapter.sentences) for chapter in self.chapters)


def book_timings(
    timeline: Sequence[ChapterTimeline],
    stretches: Sequence[M4bStretch],
    titles: Mapping[int, str],
    sentences: Mapping[str, Sentence],
) -> BookTimings:
    """The book's timings from assembly's timeline.

    Args:
        timeline: each chapter's sentences' speech, as assembly laid it out.
        stretches: where the chapters play in the M4B(s) (none when no M4B is written).
        titles: each chapter's title, by index.
        sentences: the sentence each sentence WAV holds, by the WAV's path.

    Raises:
        AssemblyError: a sentence WAV of the timeline is not among ``sentences``.
    """
    by_chapter: dict[int, list[M4bStretch]] = {}
    for stretch in stretches:
        by_chapter.setdefault(stretch.chapter, []).append(stretch)
    chapters = []
    for chapter in timeline:
        own = sorted(by_chapter.get(chapter.index, []), key=lambda stretch: stretch.start)
        starts = [stretch.start for stretch in own]

        def in_book(sample: int, within: int) -> int:
            if not own:
                return chapter.start + sample
            stretch = own[max(bisect.bisect_right(starts, within) - 1, 0)]
            return stretch.at + sample - stretch.start

        timed = []
        for span in chapter.spans:
            sentence = sentences.get(span.path)
            if sentence is None:
                raise AssemblyError(
                    f"{span.path}: no sentence of the book is known for this audio "
                    "(the book's text changed since it was read; run it with --fresh)"
                )
            timed.append(
                SentenceTiming(
                    sentence.index,
                    sentence.paragraph_index,
                    sentence.text,
                    sentence.written,
                    span.start,
                    span.end,
                    in_book(span.start, span.start),
                    in_book(span.end, span.start),
                )
            )
        m4b = own[0].path.name if own else ""
        chapters.append(
            ChapterTiming(
                chapter.index,
                titles.get(chapter.index, ""),
                chapter.samples,
                in_book(0, 0),
                m4b,
                tuple(timed),
            )
        )
    return BookTimings(tuple(chapters))


def timings_json(timings: BookTimings, fragments: Mapping[tuple[int, int], str] | None = None) -> str:
    """The timings as the JSON file beside the outputs (``fragments``: each sentence's place in the
    read-along EPUB, 'document#id', by (chapter, sentence))."""
    fragments = fragments or {}
    chapters = []
    for chapter in timings.chapters:
        sentences = []
        for sentence in chapter.sentences:
            entry: dict[str, Any] = {
                "index": sentence.index,
                "paragraph": sentence.paragraph,
                "start": sentence.start,
                "end": sentence.end,
                "book_start": sentence.book_start,
                "book_end": sentence.book_end,
                "spoken": sentence.spoken,
                "written": _written(sentence.written),
            }
            if (chapter.index, sentence.index) in fragments:
                entry["epub"] = fragments[chapter.index, sentence.index]
            sentences.append(entry)
        chapters.append(
            {
                "index": chapter.index,
                "title": chapter.title,
                "samples": chapter.samples,
                "book_start": chapter.book_start,
                "m4b": chapter.m4b,
                "sentences": sentences,
            }
        )
    document = {"sample_rate": SAMPLE_RATE, "sentences": timings.sentence_count, "chapters": chapters}
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def _written(span: WrittenSpan | None) -> dict[str, Any] | None:
    """The written words and where they stand: in the book file (EPUB: a block of a content
    document, as ``pipeline.ingest.xhtml`` cuts it), or in the paragraph (other formats)."""
    if span is None:
        return None
    written: dict[str, Any] = {"text": span.text, "start": span.start, "end": span.end}
    if span.place is not None:
        written["place"] = {
            "document": span.place.document,
            "block": span.place.block,
            "start": span.place.start,
            "end": span.place.end,
        }
    return written


def write_text_file(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` under a temporary name first, then rename: never half a file."""
    partial = temporary_sibling(path, "partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise AssemblyError(
            f"{path}: cannot write it: {exc.strerror} (check the disk and permissions)"
        ) from exc
    return path

"""Read-along at assembly: every sentence's timings (always), and the subtitles and read-along EPUB
a job asks for, written beside its audio (``pipeline.readalong``).

The sentences' words as the book writes them, and their places in it, are not stored: the job's
stored book is read again as ingestion read it (same options: its chapters, pronunciations and
dialogue stretches), which takes a second or two for a
long novel, and each sentence found is checked against the one recorded. A book that reads
differently now (tts-jobs was upgraded while the job ran) fails here, saying so, rather than
marking the wrong words.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from jobs.book_names import as_given
from jobs.choices.options import JobOptions, recorded_options
from jobs.runtime import Runtime
from pipeline.errors import AssemblyError, BookError
from storage import repo
from storage.models import Job

if TYPE_CHECKING:
    from pipeline.audio import AssemblyOptions, AssemblyReport
    from pipeline.readalong import ReadAlong
    from pipeline.text import TextOptions
    from pipeline.types import Chapter, Sentence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedBook:
    """What the read-along needs of a job, read with the rest of what assembly needs."""

    source: Path  # the stored copy of the book
    options: JobOptions  # how it was read and spoken
    identifier: str
    # (chapter, sentence) -> (text, audio path), for the sentences with audio
    recorded: dict[tuple[int, int], tuple[str, str]]
    given_name: str = ""  # the file the user gave (the book's name where it states no title)


def recorded_book(rt: Runtime, session: Session, job: Job) -> RecordedBook:
    rows = repo.job_recorded_words(session, job.id)
    paths = rt.artifacts.absolute_many([path for *_, path in rows])
    recorded = {(chapter, index): (text, path)
                for (chapter, index, text, _), path in zip(rows, paths, strict=True)}
    return RecordedBook(
        rt.artifacts.resolve(job.source_path),
        recorded_options(job),
        f"urn:sha256:{job.source_sha256}",
        recorded,
        job.source_name,
    )


@dataclass(frozen=True)
class BookReadAgain:
    """The job's book read again as it was spoken, and each recorded sentence found in it with its
    written words, by its audio's path: what the timings are made from."""

    read: Any  # pipeline.ingest's read book, as the user gave it
    sentences: dict[str, Sentence]


def read_book_again(book: RecordedBook) -> BookReadAgain:
    """Read ``book`` again (a second or two for a long novel: done beside the assembly, whose
    encoders run in other processes, not after it).

    Raises:
        AssemblyError: the book cannot be read again as it was.
    """
    from pipeline.ingest import read_book

    reading = book.options.reading()
    try:
        with _ingest_warnings_unsaid():
            read = as_given(read_book(book.source, reading), book.source, book.given_name or book.source.name)
    except BookError as exc:
        raise AssemblyError(
            f"{book.source}: cannot read the book again for its timings: {exc.problem}"
        ) from exc
    return BookReadAgain(read, _sentences_by_audio(read.chapters, book,
                                                   replace(book.options.speaking(read), written=True)))


def write_readalong_outputs(
    job_id: int, book: RecordedBook, report: AssemblyReport, options: AssemblyOptions, out_dir: Path,
    read_again: BookReadAgain | None = None,
) -> ReadAlong:
    """The timings file, and the subtitles and EPUB that ``options`` ask for, beside the audio;
    ``read_again``: the book as :func:`read_book_again` read it (read now if not given).

    Raises:
        AssemblyError: the book cannot be read again as it was, or a file cannot be written.
    """
    from pipeline.readalong import write_readalong

    again = read_again or read_book_again(book)
    try:
        read_along = write_readalong(again.read, again.sentences, report, options, out_dir,
                                     reading=book.options.reading(), identifier=book.identifier)
    except BookError as exc:  # the stored EPUB, read again for its documents
        raise AssemblyError(
            f"{book.source}: cannot read the book again for its read-along EPUB: {exc.problem}"
        ) from exc
    log.info("job=%s: timings of %d sentences in %s", job_id, read_along.sentences, read_along.timings)
    return read_along


@contextmanager
def _ingest_warnings_unsaid() -> Iterator[None]:
    """The book's warnings are the job's already (logged when it was ingested): not again, from this
    thread (another thread may be ingesting a book whose warnings are news)."""
    reader = threading.get_ident()

    def other_threads(record: logging.LogRecord) -> bool:
        return record.thread != reader

    ingest = logging.getLogger("pipeline.ingest")
    ingest.addFilter(other_threads)
    try:
        yield
    finally:
        ingest.removeFilter(other_threads)


def _sentences_by_audio(chapters: Sequence[Chapter], book: RecordedBook, speaking: TextOptions
                        ) -> dict[str, Sentence]:
    """Each recorded sentence, found again with its written words, by its audio's path."""
    from pipeline.text import split_sentences

    found: dict[str, Sentence] = {}
    for chapter in chapters:
        for sentence in split_sentences(chapter, speaking):
            text, path = book.recorded.get((chapter.index, sentence.index), (None, ""))
            if text is None:
                continue
            if text != sentence.text:
                raise AssemblyError(
                    f"chapter {chapter.index + 1}, sentence {sentence.index + 1}: the book now reads "
                    f"{sentence.text[:60]!r} where {text[:60]!r} was spoken (tts-jobs changed while the job "
                    "ran?); run the book again with --fresh for its read-along outputs and timings"
                )
            found[path] = sentence
    return found

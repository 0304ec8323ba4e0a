"""While a run's engine loads, its book is read in a process of its own (``ingest_beside``): the
real reader in a real child process, the real SQLite job table both processes share."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_beside, ingest_job
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage import repo
from storage.models import Chapter, Sentence
from tests.books import write_epub

CHAPTERS = [("One", ["The first sentence.", "The second one."]), ("Two", ["The third sentence."])]


def test_a_book_read_in_its_own_process_is_recorded_as_one_read_here_and_logged_here(
        rt: Runtime, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / "book.epub", "Beside", CHAPTERS)
    here, beside = (submit_book(rt, book, JobOptions(out_dir=tmp_path / name)) for name in ("a", "b"))
    assert ingest_job(rt, here)
    caplog.set_level(logging.INFO)

    assert ingest_beside(rt, beside)

    assert sentence_texts(rt, beside) == sentence_texts(rt, here) and len(sentence_texts(rt, here)) >= 3
    [status] = job_statuses(rt, beside)
    assert status.state == "synthesizing"
    told = [r.getMessage() for r in caplog.records if r.name == "jobs.ingest"]  # the child's own line
    assert told == [f"job={beside}: 2 chapters, {len(sentence_texts(rt, here))} sentences"]


def sentence_texts(rt: Runtime, job_id: int) -> list[tuple[int, str]]:
    with rt.read_session() as session:
        return [(row.index, row.text) for row in session.execute(
            select(Chapter.index, Sentence.text).join(Chapter, Sentence.chapter_id == Chapter.id)
            .where(Sentence.job_id == job_id).order_by(Chapter.index, Sentence.index))]


def test_a_book_its_reader_refuses_fails_its_job_with_the_readers_words(rt: Runtime, tmp_path: Path) -> None:
    job_id = submit_book(rt, write_epub(tmp_path / "book.epub", "Spoiled", CHAPTERS),
                         JobOptions(out_dir=tmp_path / "out"))
    with rt.read_session() as session:  # the stored copy spoiled after it was checked
        stored = rt.artifacts.resolve(repo.get_job(session, job_id).source_path)
    stored.write_bytes(b"PK\x03\x04 not a zip archive any more")

    assert not ingest_beside(rt, job_id)

    [status] = job_statuses(rt, job_id)
    assert status.state == "failed" and "book.epub" in status.error


def test_a_reader_process_that_dies_stops_the_run_with_its_last_words(rt: Runtime, tmp_path: Path) -> None:
    """The child cannot read the job table (a data folder with no database there): the run fails
    with what the child said last, not a bare exit status."""
    elsewhere = open_runtime(replace(rt.settings, data_dir=tmp_path / "empty",
                                     database_url=f"sqlite:///{tmp_path / 'empty.db'}"), upgrade_schema=False)

    with pytest.raises(RuntimeError, match=r"reading the book failed \(exit status 1\): OperationalError: .*no such table"):
        ingest_beside(elsewhere, 1)

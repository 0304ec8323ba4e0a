"""`tts-jobs run` reads the book it is given once, to check it, and submits what it read: not a
second time before the job's stored copy is cut into sentences (beside the engine's load): a
5-MB EPUB took 0.6-0.9 s to read on the build machine, on the interpreter the imports need."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipeline.ingest
from jobs.choices.options import JobOptions
from jobs.embedded import plan_run, run_book
from jobs.runtime import Runtime
from jobs.status import job_statuses
from pipeline.files import file_sha256
from storage import repo
from tests.books import write_epub

CHAPTERS = [("One", ["The first line is read.", "So is the second."]), ("Two", ["And the last one."])]


def test_a_run_reads_the_book_it_is_given_once(rt: Runtime, tmp_path: Path, tiny_engine,  # type: ignore[no-untyped-def]
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    book = write_epub(tmp_path / "twice.epub", "Read Twice", CHAPTERS)
    reads: list[Path] = []
    read_book = pipeline.ingest.read_book

    def counted(path: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(Path(path))
        return read_book(path, *args, **kwargs)

    monkeypatch.setattr(pipeline.ingest, "read_book", counted)
    job_id = run_book(rt, plan_run(rt, book, JobOptions(formats=("wav",), out_dir=tmp_path / "out")), tiny_engine)

    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    assert reads[0] == book and reads.count(book) == 1  # the check; then only the job's stored copy
    assert len(reads) >= 2
    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        assert (job.title, job.source_sha256, job.book_format) == ("Read Twice", file_sha256(book), "epub")

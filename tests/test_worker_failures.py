"""A synthesis task whose batch fails its book ends in Celery's FAILURE state (Flower's Failed tab),
once, with the book's failure recorded: the Celery task itself runs, on the real tiny engine and
a real database, with a device too small for the book's only sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.cluster import messages, tasks
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from pipeline.errors import OutOfDeviceMemory
from tests.books import write_epub


def test_a_batch_whose_only_sentence_fails_its_book_is_a_failed_task(
        tmp_path: Path, settings_factory, tiny_engine, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    rt = open_runtime(settings_factory(stream_seconds=0.0))
    book = write_epub(tmp_path / "book.epub", "Too Big", [("One", ["A sentence no device can hold."])])
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    assert ingest_job(rt, job_id)
    [batch_id] = plan_pending(rt)

    def out_of_memory(*_: object, **__: object) -> None:
        raise OutOfDeviceMemory("out of memory even for one sentence")

    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(tiny_engine, "synthesize", out_of_memory)
    monkeypatch.setattr(tasks, "engine", lambda: tiny_engine)
    monkeypatch.setattr(tasks, "runtime", lambda: rt)
    monkeypatch.setattr(messages, "send_assemble_ahead", lambda _rt, batch: sent.append(("ahead", batch)))
    monkeypatch.setattr(messages, "send_assemblies", lambda _rt, jobs: sent.append(("assemble", list(jobs))))

    result = tasks.synthesize_batch.apply(args=[batch_id])

    assert result.state == "FAILURE", result.traceback
    assert isinstance(result.result, tasks.JobFailed)
    assert f"job {job_id} failed: 2 sentence(s) could not be spoken" in str(result.result)  # title and text
    assert result.info is result.result and tasks.synthesize_batch.request.retries == 0
    [status] = job_statuses(rt, job_id)
    assert status.state == "failed" and "sentence 1" in (status.error or "")
    assert ("assemble", [job_id]) not in sent  # a failed book is not assembled


def test_a_batch_that_speaks_its_book_is_a_successful_task(
        tmp_path: Path, settings_factory, tiny_engine, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    rt = open_runtime(settings_factory(stream_seconds=0.0))
    book = write_epub(tmp_path / "book.epub", "Fine", [("One", ["A sentence that fits."])])
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    assert ingest_job(rt, job_id)
    [batch_id] = plan_pending(rt)
    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(tasks, "engine", lambda: tiny_engine)
    monkeypatch.setattr(tasks, "runtime", lambda: rt)
    monkeypatch.setattr(messages, "send_assemble_ahead", lambda _rt, batch: sent.append(("ahead", batch)))
    monkeypatch.setattr(messages, "send_assemblies", lambda _rt, jobs: sent.append(("assemble", list(jobs))))

    result = tasks.synthesize_batch.apply(args=[batch_id])

    assert result.state == "SUCCESS", result.traceback
    assert ("assemble", [job_id]) in sent

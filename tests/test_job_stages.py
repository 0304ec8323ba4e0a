"""A job's stages as use cases (submit, ingest, plan, speak, assemble; retry, cancel) with the real
engine (tiny synthetic weights on CPU) and a real database.

Failures are injected at the engine boundary only: the engine itself runs for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.assemble import assemble_job
from jobs.batches.speak import synthesize_batch
from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.lifecycle import cancel_job, retry_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from pipeline.errors import NoSuchJob, OutOfDeviceMemory, TtsJobsError
from storage import repo
from storage.models import Batch, BatchState, JobState, SentenceState
from tests.books import write_epub

CHAPTERS = [("One", ["The first sentence.", "The second sentence, a little longer than the first."]),
            ("Two", ["第二章的句子。", "And a last one."])]
# a book of one chapter is planned as one batch (a longer book in waves of chapters: jobs/plan.py)
ONE_CHAPTER = [("One", [sentence for _, sentences in CHAPTERS for sentence in sentences])]


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    from pipeline.engine import EngineConfig, load_engine

    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


class FailingEngine:
    """The real engine, except for requests whose text contains ``poison``."""

    def __init__(self, engine, poison: str, error: Exception) -> None:  # type: ignore[no-untyped-def]
        self._engine, self._poison, self._error = engine, poison, error
        self.calls = 0

    def synthesize(self, requests, **options):  # type: ignore[no-untyped-def]
        self.calls += 1
        if any(self._poison in r.text for r in requests):
            raise self._error
        return self._engine.synthesize(requests, **options)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._engine, name)


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url, max_attempts=2), upgrade_schema=False)


def _ingested_job(rt: Runtime, tmp_path: Path, chapters=CHAPTERS, name: str = "book") -> int:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / f"{name}.epub", name.title(), chapters)
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    assert ingest_job(rt, job_id)
    return job_id


def test_a_duplicate_delivery_leaves_a_leased_batch_alone(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id = _ingested_job(rt, tmp_path, ONE_CHAPTER)
    [batch_id] = plan_pending(rt)
    with rt.session() as s:
        repo.claim_batch(s, batch_id, "gpu0", rt.settings.lease_seconds)
        s.commit()

    assert synthesize_batch(rt, tiny_engine, batch_id, "gpu1") == []

    assert job_statuses(rt, job_id)[0].sentences_done == 0


def test_a_sentence_too_long_for_the_device_fails_its_job_and_spares_the_others(rt, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                                tiny_engine) -> None:
    bad = _ingested_job(rt, tmp_path, [("Only", ["A poison sentence."])], name="bad")
    good = _ingested_job(rt, tmp_path, name="good")
    engine = FailingEngine(tiny_engine, "poison", OutOfDeviceMemory("CUDA out of memory"))
    for batch_id in plan_pending(rt):
        for ready in synthesize_batch(rt, engine, batch_id, "gpu0"):
            assemble_job(rt, ready)

    bad_status, good_status = job_statuses(rt, bad)[0], job_statuses(rt, good)[0]
    assert bad_status.state == "failed" and "does not fit in device memory even alone" in bad_status.error
    assert "chapter 1" in bad_status.error
    assert good_status.state == "done" and len(good_status.outputs) == 2


def test_a_batch_that_always_fails_is_given_up_after_max_attempts(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id = _ingested_job(rt, tmp_path, [("Only", ["A poison sentence.", "Another one."])])
    engine = FailingEngine(tiny_engine, "poison", RuntimeError("model exploded"))
    [batch_id] = plan_pending(rt)
    for _ in range(5):  # Celery would redeliver; the batch row caps the attempts
        try:
            synthesize_batch(rt, engine, batch_id, "gpu0")
        except RuntimeError:
            pass

    assert engine.calls == rt.settings.max_attempts
    status = job_statuses(rt, job_id)[0]
    assert status.state == "failed" and "model exploded" in status.error
    with rt.session() as s:
        assert s.get(Batch, batch_id).state == BatchState.FAILED.value


def test_retry_redoes_only_what_is_missing(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id = _ingested_job(rt, tmp_path)
    for batch_id in plan_pending(rt):
        synthesize_batch(rt, tiny_engine, batch_id, "gpu0")
    with rt.session() as s:  # lose one sentence's audio and fail the job, as a crash might
        [first_chapter, _] = repo.job_chapters(s, job_id)
        lost, *kept = repo.chapter_sentences(s, first_chapter.id)
        repo.fail_sentence(s, lost, "disk full")
        repo.move_job(s, job_id, JobState.FAILED, only_from=JobState.active(), error="disk full")
        kept_files = {k.audio_path: rt.artifacts.resolve(k.audio_path).stat().st_mtime_ns for k in kept}
        s.commit()

    plan = retry_job(rt, job_id)
    assert (plan.next_step, plan.sentences_reset) == ("plan", 1)
    [batch_id] = plan_pending(rt)
    assert synthesize_batch(rt, tiny_engine, batch_id, "gpu0") == [job_id]
    assemble_job(rt, job_id)

    status = job_statuses(rt, job_id)[0]
    assert status.state == "done" and status.sentences_done == status.sentences_total
    assert {p: rt.artifacts.resolve(p).stat().st_mtime_ns for p in kept_files} == kept_files


def test_gpu_workers_record_their_batches_while_a_book_is_assembled(rt, tmp_path: Path, tiny_engine,  # type: ignore[no-untyped-def]
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Assembly takes minutes; no database transaction may stay open meanwhile (on SQLite each
    one holds the write lock, and two H200s idled 12-14 s per assembled book waiting on it)."""
    import pipeline.audio as audio

    first = _ingested_job(rt, tmp_path, name="first")
    for batch_id in plan_pending(rt):
        synthesize_batch(rt, tiny_engine, batch_id, "gpu0")
    second = _ingested_job(rt, tmp_path, ONE_CHAPTER, name="second")
    [batch_id] = plan_pending(rt)
    real_assembly = audio.assemble_audiobook
    recorded = []

    def assemble_while_another_batch_lands(*args, **kwargs):  # type: ignore[no-untyped-def]
        recorded.append(synthesize_batch(rt, tiny_engine, batch_id, "gpu1"))
        return real_assembly(*args, **kwargs)

    monkeypatch.setattr(audio, "assemble_audiobook", assemble_while_another_batch_lands)
    assemble_job(rt, first)
    assert recorded == [[second]]
    first_status, second_status = job_statuses(rt, first)[0], job_statuses(rt, second)[0]
    assert first_status.state == "done"
    assert second_status.sentences_done == second_status.sentences_total


def test_gpu_workers_record_their_batches_while_a_book_is_read(rt, tmp_path: Path, tiny_engine,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a big book takes seconds; the same rule as for assembly: no open transaction."""
    import pipeline.ingest as ingest

    first = _ingested_job(rt, tmp_path, ONE_CHAPTER, name="first")
    [batch_id] = plan_pending(rt)
    book = write_epub(tmp_path / "second.epub", "Second", CHAPTERS)
    second = submit_book(rt, book, JobOptions(formats=("wav",)))
    real_read = ingest.read_book
    recorded = []

    def read_while_a_batch_lands(path, options=None):  # type: ignore[no-untyped-def]
        recorded.append(synthesize_batch(rt, tiny_engine, batch_id, "gpu0"))
        return real_read(path, options)

    monkeypatch.setattr(ingest, "read_book", read_while_a_batch_lands)
    assert ingest_job(rt, second)
    assert recorded == [[first]]
    status = job_statuses(rt, second)[0]
    assert status.state == "synthesizing" and status.sentences_total > 0
    assert ingest_job(rt, second)  # a second delivery records nothing twice
    assert job_statuses(rt, second)[0].sentences_total == status.sentences_total


def test_each_sentence_is_handed_to_the_wav_writer_as_the_engine_finishes_it(rt, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                              tiny_engine, monkeypatch) -> None:
    """A GPU worker writes every sentence's WAV while the rest of its batch is synthesized; the
    writes are handed in before synthesis returns, once each, and the batch records them all."""
    import pipeline.audio.wavio as wavio

    job_id = _ingested_job(rt, tmp_path, ONE_CHAPTER)
    [batch_id] = plan_pending(rt)
    real_synthesize = tiny_engine.synthesize
    returned = []
    written_during: list[bool] = []
    real_write = wavio.SentenceWavWriter.write

    def synthesize(requests, **options):  # type: ignore[no-untyped-def]
        results = real_synthesize(requests, **options)
        returned.append(True)
        return results

    seen = set()

    def write(self, key, path, waveform):  # type: ignore[no-untyped-def]
        if key not in seen:
            seen.add(key)
            written_during.append(not returned)
        return real_write(self, key, path, waveform)

    monkeypatch.setattr(tiny_engine, "synthesize", synthesize)
    monkeypatch.setattr(wavio.SentenceWavWriter, "write", write)
    synthesize_batch(rt, tiny_engine, batch_id, "gpu0")
    status = job_statuses(rt, job_id)[0]
    assert written_during and all(written_during)
    assert len(written_during) == status.sentences_total == status.sentences_done


def test_a_cancelled_job_is_not_planned_or_spoken(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id = _ingested_job(rt, tmp_path, ONE_CHAPTER)
    [batch_id] = plan_pending(rt)
    cancel_job(rt, job_id)
    with pytest.raises(TtsJobsError, match="cancelled already"):
        cancel_job(rt, job_id)
    with pytest.raises(NoSuchJob, match="no job 999: see `tts-jobs status`"):
        cancel_job(rt, 999)

    assert synthesize_batch(rt, tiny_engine, batch_id, "gpu0") == []
    with rt.session() as s:
        states = {x.state for c in repo.job_chapters(s, job_id) for x in repo.chapter_sentences(s, c.id)}
    assert states == {SentenceState.PENDING.value}
    assert job_statuses(rt, job_id)[0].state == "cancelled"


def test_refine_runs_only_for_the_jobs_that_asked_for_it(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    class CountingEngine(FailingEngine):
        refined: list[str] = []

        def refine_texts(self, texts, *params):  # type: ignore[no-untyped-def]
            self.refined.extend(texts)
            return self._engine.refine_texts(texts, *params)

    plain = _ingested_job(rt, tmp_path, [("Plain", ["Read as written."])], name="plain")
    book = write_epub(tmp_path / "refined.epub", "Refined", [("Refined", ["Read with breaths."])])
    refined = submit_book(rt, book, JobOptions(formats=("wav",), refine=True))
    assert ingest_job(rt, refined)
    engine = CountingEngine(tiny_engine, "never-present", RuntimeError())
    for batch_id in plan_pending(rt):
        synthesize_batch(rt, engine, batch_id, "gpu0")

    assert "Read with breaths." in engine.refined and "Read as written." not in engine.refined
    assert all(job_statuses(rt, j)[0].sentences_done == job_statuses(rt, j)[0].sentences_total
               for j in (plain, refined))


def test_a_batch_that_kills_its_worker_every_time_is_given_up(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    """Each death is taken over with one more attempt; past the cap the batch and its job fail."""
    import socket
    import subprocess
    import sys

    job_id = _ingested_job(rt, tmp_path, [("Only", ["A sentence that crashes the device."])])
    [batch_id] = plan_pending(rt)
    host = socket.gethostname()
    for _ in range(rt.settings.max_attempts):  # each attempt's process dies mid-batch
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
        with rt.session() as s:
            assert repo.claim_batch(s, batch_id, f"{host}:{dead}", rt.settings.lease_seconds) or \
                repo.take_over_batch(s, batch_id, f"{host}:{dead}", s.get(Batch, batch_id).leased_by)
            s.commit()

    assert synthesize_batch(rt, tiny_engine, batch_id, f"{host}:1") == []

    status = job_statuses(rt, job_id)[0]
    assert status.state == "failed" and "died" in status.error
    with rt.session() as s:
        assert s.get(Batch, batch_id).state == BatchState.FAILED.value


def test_status_shows_recent_throughput_and_an_eta_while_a_job_runs(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    chapters = [("One", [f"Sentence {i} of the chapter." for i in range(7)])]
    job_id = _ingested_job(rt, tmp_path, chapters)
    rt_small = Runtime(settings=rt.settings.with_overrides(max_batch=4), sessions=rt.sessions,
                               artifacts=rt.artifacts)
    first, *rest = plan_pending(rt_small)
    synthesize_batch(rt_small, tiny_engine, first, "gpu0")

    status = job_statuses(rt, job_id)[0]
    assert 0 < status.sentences_done < status.sentences_total
    assert status.x_realtime and status.x_realtime > 0
    assert status.eta_seconds and status.eta_seconds > 0
    for batch_id in rest:
        synthesize_batch(rt_small, tiny_engine, batch_id, "gpu0")
    assert job_statuses(rt, job_id)[0].eta_seconds is None  # nothing left to wait for

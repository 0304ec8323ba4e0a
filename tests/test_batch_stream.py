"""A worker's batches as one stream: the real engine (tiny weights, CPU) and the real database.

The Celery messages of batches a stream took are still delivered: they must find nothing to do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from jobs.batches import stream as batch_stream
from jobs.batches.speak import synthesize_batch
from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from pipeline.errors import OutOfDeviceMemory
from storage import repo
from storage.models import Batch, BatchState, JobState, Sentence, SentenceState
from tests.books import write_epub

SENTENCES = [f"Sentence number {i}, which the stream reads in its turn." for i in range(11)]


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    from pipeline.engine import EngineConfig, load_engine

    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    # A stream ends when it finds no queued batch; its window (60 s by default) is longer here than
    # any test runs, so that a loaded machine changes how long a stream takes, never what it speaks.
    return open_runtime(settings_factory(database_url, max_attempts=2, max_batch=4, stream_seconds=3600.0),
                        upgrade_schema=False)


def _planned_book(rt: Runtime, tmp_path: Path, name: str = "book", refine: bool = False,
                  sentences: list[str] = SENTENCES) -> tuple[int, list[int]]:
    book = write_epub(tmp_path / f"{name}.epub", name.title(), [("One", sentences[:6]), ("Two", sentences[6:])])
    job_id = submit_book(rt, book, JobOptions(formats=("wav",), refine=refine))
    assert ingest_job(rt, job_id)
    return job_id, plan_pending(rt)


def _batch_states(rt: Runtime, batch_ids: list[int]) -> list[str]:
    with rt.session() as s:
        return [s.get(Batch, b).state for b in batch_ids]


def test_one_task_speaks_the_queued_batches_after_its_own_and_their_messages_find_nothing(
        rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id, batch_ids = _planned_book(rt, tmp_path)
    assert len(batch_ids) >= 3
    ready: list[int] = []
    returned: list[int] = []

    batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", ready.extend, returned.append)

    assert _batch_states(rt, batch_ids) == [BatchState.DONE.value] * len(batch_ids)
    assert ready == [job_id] and returned == []
    status = job_statuses(rt, job_id)[0]
    assert status.state == JobState.ASSEMBLING.value and status.sentences_done == status.sentences_total
    with rt.session() as s:
        spoken = s.scalars(select(Sentence).where(Sentence.job_id == job_id)).all()
        assert all(x.state == SentenceState.DONE.value and x.gpt_steps > 0 for x in spoken)
        assert all((rt.artifacts.root / x.audio_path).is_file() for x in spoken)
    # the messages of the batches the stream took arrive later, at any worker: nothing to do
    for batch_id in batch_ids[1:]:
        assert synthesize_batch(rt, tiny_engine, batch_id, "host:2") == []


def test_a_retried_task_speaks_what_its_failed_attempt_still_held(
        rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    """The database failed under a task after it claimed its batch: nothing could give the batch
    back, so it stays leased to this live process. The retry (the same process) puts it back in
    its place first and speaks it, not only the batches after it (else it waits out the lease)."""
    job_id, batch_ids = _planned_book(rt, tmp_path)
    with rt.session() as s:
        assert repo.claim_batch(s, batch_ids[0], "host:1", rt.settings.lease_seconds) is not None
        s.commit()

    batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", lambda jobs: None, lambda b: None)

    assert _batch_states(rt, batch_ids) == [BatchState.DONE.value] * len(batch_ids)
    status = job_statuses(rt, job_id)[0]
    assert status.sentences_done == status.sentences_total


def test_each_batch_is_measured_for_assembly_while_the_stream_goes_on(
        rt, tmp_path: Path, tiny_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With measure helpers, every sentence WAV of the stream gets its measure beside it — the
    very numbers assembly would take from the audio — so assembly need not read it twice."""
    from pipeline.audio.measure import MeasureAhead, measure_path, take_measure
    from pipeline.audio.stitch_helpers import stop_idle_helpers
    from pipeline.audio.wav_reading import read_sentence_audio, segment_samples

    measurer = MeasureAhead(helpers=1)
    monkeypatch.setattr(batch_stream, "_measure_ahead", measurer)
    job_id, batch_ids = _planned_book(rt, tmp_path)

    batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", lambda jobs: None, lambda b: None)
    measurer.close()
    stop_idle_helpers()

    with rt.session() as s:
        paths = [rt.artifacts.root / x.audio_path for x in
                 s.scalars(select(Sentence).where(Sentence.job_id == job_id)).all()]
    assert measurer.measured == len(paths) >= len(SENTENCES)  # and the chapter titles
    for path in paths:
        kept = measure_path(path).read_bytes()
        fresh = take_measure(segment_samples(read_sentence_audio(path)), trim=True)
        assert kept.endswith(fresh.energies.astype("<f4").tobytes())


def test_a_book_is_ready_for_assembly_only_once_its_last_batches_are_measured(
        rt, tmp_path: Path, tiny_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """At the queue's end, a batch is recorded only once its sentences are measured: when the book
    goes to assembly, every sentence's measure is already beside its WAV (none left to take)."""
    from pipeline.audio.measure import MeasureAhead, measure_path
    from pipeline.audio.stitch_helpers import stop_idle_helpers

    measurer = MeasureAhead(helpers=2)
    monkeypatch.setattr(batch_stream, "_measure_ahead", measurer)
    job_id, batch_ids = _planned_book(rt, tmp_path)
    missing_when_ready: dict[int, list[str]] = {}

    def ready(jobs: list[int]) -> None:
        for job in jobs:
            with rt.session() as s:
                sentences = s.scalars(select(Sentence).where(Sentence.job_id == job)).all()
                missing_when_ready[job] = [x.audio_path for x in sentences
                                           if not measure_path(rt.artifacts.root / x.audio_path).is_file()]

    try:
        batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", ready, lambda b: None)
    finally:
        measurer.close()
        stop_idle_helpers()

    assert missing_when_ready == {job_id: []}


def test_books_read_at_different_times_are_spoken_and_handed_to_assembly_one_after_the_other(
        rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    """A shelf's books are planned one by one as they are read. The stream finishes the book
    planned first, so it is assembled while the next is spoken — even though the next book's
    sentences are the longer ones (taken longest first across plans, both books ended together
    and all of their encoding waited for the GPU to finish)."""
    first, first_batches = _planned_book(rt, tmp_path, "first")
    longer = [f"{text} It goes on for a while longer than the first book's sentences did." for text in SENTENCES]
    second, second_batches = _planned_book(rt, tmp_path, "second", sentences=longer)
    left_of_second: dict[int, int] = {}

    def ready(jobs: list[int]) -> None:
        for job in jobs:
            left_of_second[job] = job_statuses(rt, second)[0].sentences_total - \
                job_statuses(rt, second)[0].sentences_done

    batch_stream.synthesize_stream(rt, tiny_engine, first_batches[0], "host:1", ready, lambda b: None)

    assert _batch_states(rt, first_batches + second_batches) == [BatchState.DONE.value] * (
        len(first_batches) + len(second_batches))
    assert list(left_of_second) == [first, second]
    assert left_of_second[first] > len(SENTENCES) // 2 and left_of_second[second] == 0


def test_the_stream_ends_after_its_time_and_leaves_the_rest_to_their_messages(
        settings_factory, database_url: str, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    rt = open_runtime(settings_factory(database_url, max_batch=4, stream_seconds=1e-9),
                              upgrade_schema=False)
    _, batch_ids = _planned_book(rt, tmp_path)

    batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", lambda jobs: None,
                                   lambda batch: None)

    assert _batch_states(rt, batch_ids) == [BatchState.DONE.value] + [BatchState.QUEUED.value] * (len(batch_ids) - 1)


def test_a_batch_that_needs_the_refine_pass_ends_the_stream_before_it(
        rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    _, plain = _planned_book(rt, tmp_path, "plain")
    # shorter sentences: a stream takes the longest queued batch next, so these come after most plain ones
    _, refined = _planned_book(rt, tmp_path, "refined", refine=True, sentences=[f"Short {i}." for i in range(11)])

    batch_stream.synthesize_stream(rt, tiny_engine, plain[0], "host:1", lambda jobs: None, lambda batch: None)

    with rt.session() as s:
        longest = {b: s.get(Batch, b).longest_positions for b in plain + refined}
    before_refine = [b for b in plain if longest[b] > max(longest[r] for r in refined)]
    assert len(before_refine) >= 2
    assert _batch_states(rt, before_refine) == [BatchState.DONE.value] * len(before_refine)
    assert _batch_states(rt, refined) == [BatchState.QUEUED.value] * len(refined)


class _BreaksAfterTakingMore:
    """The real engine, whose stream fails once it has claimed the next batch (a device error)."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self._engine = engine

    def synthesize_stream(self, requests, more, on_result, **options):  # type: ignore[no-untyped-def]
        assert more()  # the next batch, claimed
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._engine, name)


def test_a_failed_stream_gives_back_every_batch_it_held_and_sends_the_others_again(
        rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id, batch_ids = _planned_book(rt, tmp_path)
    returned: list[int] = []

    with pytest.raises(RuntimeError, match="illegal memory access"):
        batch_stream.synthesize_stream(rt, _BreaksAfterTakingMore(tiny_engine), batch_ids[0], "host:1",
                                       lambda jobs: None, returned.append)

    assert _batch_states(rt, batch_ids) == [BatchState.QUEUED.value] * len(batch_ids)
    assert returned == [batch_ids[1]]  # the task's own batch comes back with the task's retry
    assert job_statuses(rt, job_id)[0].state == JobState.SYNTHESIZING.value


def test_a_batch_that_cannot_be_written_goes_back_and_the_others_stay_recorded(
        rt, tmp_path: Path, tiny_engine, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A full disk while a stream records its second batch: that batch goes back to the queue
    (its message sent again, since the stream took it from the queue), the stream's error is
    raised for the task's retry, and the batches recorded before and beside it stay done."""
    from pipeline.audio import SentenceWavWriter
    from pipeline.errors import AssemblyError

    job_id, batch_ids = _planned_book(rt, tmp_path)
    real = SentenceWavWriter.take_seconds
    calls: list[int] = []

    def full_disk_on_the_second_batch(self, keys):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise AssemblyError("chapter_0002.wav: cannot write the sentence audio: No space left on device")
        return real(self, keys)

    monkeypatch.setattr(SentenceWavWriter, "take_seconds", full_disk_on_the_second_batch)
    returned: list[int] = []

    with pytest.raises(AssemblyError, match="No space left"):
        batch_stream.synthesize_stream(rt, tiny_engine, batch_ids[0], "host:1", lambda jobs: None, returned.append)

    states = dict(zip(batch_ids, _batch_states(rt, batch_ids)))
    assert len(returned) == 1 and returned[0] in batch_ids[1:]
    assert states.pop(returned[0]) == BatchState.QUEUED.value
    assert set(states.values()) == {BatchState.DONE.value} and batch_ids[0] in states
    assert job_statuses(rt, job_id)[0].state == JobState.SYNTHESIZING.value


class _StreamRunsOutOfMemory:
    """The real engine, whose stream cannot get its slots (the device's memory is taken)."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self._engine = engine

    def synthesize_stream(self, requests, more, on_result, **options):  # type: ignore[no-untyped-def]
        raise OutOfDeviceMemory("CUDA out of memory. Tried to allocate 73.00 GiB")

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._engine, name)


def test_out_of_memory_in_a_stream_speaks_the_tasks_batch_alone(rt, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    job_id, batch_ids = _planned_book(rt, tmp_path)
    returned: list[int] = []

    batch_stream.synthesize_stream(rt, _StreamRunsOutOfMemory(tiny_engine), batch_ids[0], "host:1",
                                   lambda jobs: None, returned.append)

    assert _batch_states(rt, batch_ids) == [BatchState.DONE.value] + [BatchState.QUEUED.value] * (len(batch_ids) - 1)
    assert returned == []  # it had taken no other batch
    with rt.session() as s:
        first_size = s.get(Batch, batch_ids[0]).size
    assert job_statuses(rt, job_id)[0].sentences_done == first_size > 0

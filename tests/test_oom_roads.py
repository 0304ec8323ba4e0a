"""Out of device memory on both roads into the engine — a batch spoken on its own (`run`, a
worker with streaming off) and a GPU worker's stream of batches — with the same injected fault:
both halve, both fail only the sentence that does not fit even alone, both record the same
learned batch size for the planner, and every other sentence gets the same audio.

The real engine (tiny weights, CPU) and the real database; only the device's memory is faked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from jobs.batches import stream as batch_stream
from jobs.batches.speak import synthesize_batch
from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending, register_synthesis_worker
from jobs.runtime import Runtime, open_runtime
from jobs.submit import submit_book
from pipeline.errors import OutOfDeviceMemory
from storage.models import Batch, BatchState, Sentence, SentenceState, Worker
from tests.books import write_epub

ROWS_THAT_FIT = 2  # the fake device runs out of memory on any batch of more sentences
TOO_LARGE = "Gargantuan"  # a sentence with this word does not fit even alone
WORKER = "gpu0@test"  # the device's worker, under which the learned limit is recorded

# The sentence that does not fit is the book's shortest: the planner puts it in the last batch,
# after batches that only halving can speak.
CHAPTERS = [
    ("The first chapter of the memory book", [f"The first chapter's sentence {i} is read in its turn." for i in range(5)]),
    ("The second chapter of the memory book", [f"A second chapter's longer line {i} follows the first." for i in range(4)]
     + [f"{TOO_LARGE}."]),
]


class InjectedOom:
    """The real engine on a device whose memory holds ``ROWS_THAT_FIT`` sentences at a time, and
    never a sentence with ``TOO_LARGE`` in it.

    A stream cannot get its slots at all; or, ``mid_stream``, it runs on the real engine until
    its second waveform, where the device runs out of memory (Decoder + Vocos on a long chunk)."""

    def __init__(self, engine: Any, mid_stream: bool = False) -> None:
        self.engine, self.mid_stream = engine, mid_stream
        self.batch_sizes: list[int] = []

    def synthesize(self, requests, on_waveform=None):  # type: ignore[no-untyped-def]
        self.batch_sizes.append(len(requests))
        if len(requests) > ROWS_THAT_FIT:
            raise OutOfDeviceMemory(f"{len(requests)} rows do not fit")
        self._refuse_too_large(requests)
        return self.engine.synthesize(requests, on_waveform=on_waveform)

    def synthesize_stream(self, requests, more, on_result, fetch_early=None):  # type: ignore[no-untyped-def]
        self._refuse_too_large(requests)
        if not self.mid_stream:
            raise OutOfDeviceMemory("the stream's slots do not fit")
        handed = 0

        def first_waveform_only(index, result):  # type: ignore[no-untyped-def]
            nonlocal handed
            if handed:
                raise OutOfDeviceMemory("Decoder + Vocos do not fit beside the slots")
            handed += 1
            on_result(index, result)

        def refusing_too_large():  # type: ignore[no-untyped-def]
            taken = more()
            self._refuse_too_large(taken or ())
            return taken

        return self.engine.synthesize_stream(requests, refusing_too_large, first_waveform_only,
                                             fetch_early=fetch_early)

    @staticmethod
    def _refuse_too_large(requests) -> None:  # type: ignore[no-untyped-def]
        if any(TOO_LARGE in r.text for r in requests):
            raise OutOfDeviceMemory("a sentence does not fit even alone")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    from pipeline.engine import EngineConfig, load_engine

    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


def _planned_book(settings_factory, tmp_path: Path, road: str, engine: Any) -> tuple[Runtime, list[int]]:  # type: ignore[no-untyped-def]
    """The same book, planned in a database of its own (job 1 in each: the same sentence seeds)."""
    folder = tmp_path / road
    rt = open_runtime(settings_factory(f"sqlite:///{folder / 'jobs.db'}", data_dir=folder, max_batch=4))
    register_synthesis_worker(rt, engine, WORKER, None)
    book = write_epub(tmp_path / "book.epub", "Memory", CHAPTERS)
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    assert job_id == 1 and ingest_job(rt, job_id)
    return rt, plan_pending(rt)


def _speak_alone(rt: Runtime, engine: Any, batch_ids: list[int]) -> None:
    for batch_id in batch_ids:
        synthesize_batch(rt, engine, batch_id, "host:1", learned_by=WORKER)


def _speak_as_streams(rt: Runtime, engine: Any, batch_ids: list[int]) -> None:
    """Stream after stream, as the queue's messages would start them, until no batch is queued."""
    for batch_id in batch_ids:
        batch_stream.synthesize_stream(rt, engine, batch_id, "host:1", lambda jobs: None, lambda b: None,
                                       learned_by=WORKER)


def _outcome(rt: Runtime) -> dict[str, Any]:
    with rt.session() as s:
        sentences = s.scalars(select(Sentence).order_by(Sentence.id)).all()
        batches = s.scalars(select(Batch)).all()
        worker = s.scalars(select(Worker).where(Worker.name == WORKER)).one()
        return {
            "states": {x.text: x.state for x in sentences},
            "errors": {x.text: x.error for x in sentences if x.error},
            "audio": {x.text: rt.artifacts.resolve(x.audio_path) for x in sentences if x.audio_path},
            "batches": {b.state for b in batches},
            "learned_rows": worker.max_rows,
        }


@pytest.mark.parametrize("mid_stream", [False, True], ids=["stream-cannot-start", "next-batch-does-not-fit"])
def test_both_roads_halve_isolate_and_learn_alike(settings_factory, tmp_path: Path, tiny_engine,  # type: ignore[no-untyped-def]
                                                  mid_stream: bool) -> None:
    from pipeline.audio.wav_reading import read_sentence_samples

    alone_engine, stream_engine = InjectedOom(tiny_engine), InjectedOom(tiny_engine, mid_stream)
    rt_alone, batches_alone = _planned_book(settings_factory, tmp_path, "alone", tiny_engine)
    rt_stream, batches_stream = _planned_book(settings_factory, tmp_path, "stream", tiny_engine)
    assert len(batches_alone) == len(batches_stream) >= 3

    _speak_alone(rt_alone, alone_engine, batches_alone)
    _speak_as_streams(rt_stream, stream_engine, batches_stream)

    alone, stream = _outcome(rt_alone), _outcome(rt_stream)
    too_large = f"{TOO_LARGE}."
    for road in (alone, stream):
        assert road["batches"] == {BatchState.DONE.value}  # nothing given back, nothing lost
        assert road["states"][too_large] == SentenceState.FAILED.value
        assert "does not fit in device memory even alone" in road["errors"][too_large]
        assert set(road["audio"]) == set(road["states"]) - {too_large}  # every other sentence spoken
        assert road["learned_rows"] == ROWS_THAT_FIT
    assert max(alone_engine.batch_sizes) > ROWS_THAT_FIT  # it did run out of memory, then halved
    assert stream["states"] == alone["states"]
    for text, path in alone["audio"].items():
        spoken_alone, spoken_in_stream = read_sentence_samples(path), read_sentence_samples(stream["audio"][text])
        assert len(spoken_alone) == len(spoken_in_stream) > 0, text
        assert np.abs(spoken_alone.astype(np.int32) - spoken_in_stream).max() <= 2, text  # int16 rounding

"""A job's decode slots capture only the full slots' step before its stream starts (the first
sentence waits for those captures); the steps of fewer live rows, which a stream runs only at its
end, are captured when first run, once each, and every sentence keeps its tokens. The capture
itself needs CUDA (tests/gpu): here a graph is a stand-in that replays the step it was made for
eagerly (tiny synthetic weights, fp32, on the CPU)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.decode_step import decode_step
from pipeline.engine.engine import Engine
from pipeline.engine.step_graphs import StepKind, StepRunner, row_buckets
from tests.test_engine_decode import codes_with_slots, requests_for

SLOTS = 4


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Engine:
    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


def way(kind: StepKind) -> tuple[bool, bool, int]:
    """A step's sampling stages (graphs are made per way of sampling)."""
    return kind.greedy, kind.penalised, kind.candidates


class ReplayedEagerly:
    """A captured step's stand-in: a replay runs the step it was captured for."""

    def __init__(self, runner: StepRunner, kind: StepKind) -> None:
        self.runner, self.kind = runner, kind

    def replay(self) -> None:
        decode_step(self.runner.gpt, self.runner.space, self.runner.state, self.kind)


@pytest.fixture(autouse=True)
def no_slots_before_or_after(engine: Engine) -> Any:
    engine.release_slots()  # each test makes its own slots and graphs, and leaves none behind
    yield
    engine.release_slots()


def capturing(runner: StepRunner, monkeypatch: Any) -> list[StepKind]:
    """Capture on the CPU (stand-ins); returns the steps captured, in order (on the CPU a step's
    kind is its live-row bucket by its attention bucket)."""
    captured: list[StepKind] = []

    def capture(kind: StepKind) -> None:
        captured.append(kind)
        runner._graphs[kind] = ReplayedEagerly(runner, kind)  # type: ignore[assignment]
        runner.captured += 1

    monkeypatch.setattr(runner, "use_graphs", True)
    monkeypatch.setattr(runner, "_capture", capture)
    return captured


@pytest.mark.parametrize("greedy", [True, False])
def test_a_jobs_slots_capture_the_full_step_first_and_fewer_rows_when_first_run(
        engine: Engine, monkeypatch: Any, greedy: bool) -> None:
    requests = requests_for(engine, greedy=greedy)
    eager = codes_with_slots(engine, requests, SLOTS)
    runner = engine.step_runner
    captured = capturing(runner, monkeypatch)
    longest = max(r.max_new_tokens for r in requests)

    made = engine.prepare_slots(SLOTS, max(engine.prompt_tokens_of([r.text for r in requests])), longest,
                                every_row_count=False)

    assert made == len(captured) and {kind.rows for kind in captured} == {SLOTS}  # before the stream
    before_stream = len(captured)
    got = codes_with_slots(engine, requests, SLOTS)
    assert all(torch.equal(a, b) for a, b in zip(got, eager, strict=True))
    # the last rows ran through the smaller buckets, each step captured once, when first needed
    assert len(set(captured)) == len(captured)
    prepared = {way(kind) for kind in captured[:before_stream]}
    later = captured[before_stream:]
    assert any(kind.rows < SLOTS for kind in later)
    # a full-slots step is captured in the stream only for a sampling the slots were not prepared for
    assert all(kind.rows < SLOTS or way(kind) not in prepared for kind in later)


def test_a_workers_slots_capture_every_row_count_before_any_batch(engine: Engine, monkeypatch: Any) -> None:
    captured = capturing(engine.step_runner, monkeypatch)

    engine.prepare_slots(SLOTS, 16, 20)

    assert {kind.rows for kind in captured} == set(row_buckets(SLOTS))


def test_steps_run_within_128_rows_of_the_live_ones_as_a_batch_ends() -> None:
    """A step's GEMMs run at its bucket's rows, ended ones included: as 1,024 rows end one by one,
    no step runs more than 128 rows past the live ones above 128 (powers of two ran up to 511),
    nor twice them below, in 15 graphs."""
    from pipeline.engine.step_graphs import bucket_for

    buckets = row_buckets(1024)
    assert len(buckets) == 15 and buckets[-1] == 1024 and buckets == sorted(set(buckets))
    for live in range(1, 1025):
        rows = bucket_for(live, buckets)
        assert live <= rows < (live + 128 if live > 128 else 2 * live)
    assert row_buckets(100)[-1] == 100 and row_buckets(1) == [1]


def test_a_worker_on_a_card_too_small_for_the_widest_batch_keeps_as_many_rows_as_fit() -> None:
    """A worker's slots are for every sentence it may be sent (the 2048-token cap): an H200 holds
    the widest batch's 1,024 rows; an 80-GB card as many whole 128-row buckets as fit (a stream's
    slots were its first batch's, often a lead of a few hundred rows); a card that holds under
    half of them none (its streams keep their first batch's shape, planned for that card)."""
    from pipeline.engine.step_graphs import GROWN_SLOTS_SHARE, fitting_rows

    positions, per_position = 2176, 32_640  # full-size int8 cache, one row-position in all layers
    h200, h100, a48, small = 143_771_000_000, 85_520_000_000, 48 << 30, 4 << 30

    assert fitting_rows(1024, positions, per_position, h200) == 1024
    rows = fitting_rows(1024, positions, per_position, h100)
    assert rows == 640 and rows % 128 == 0
    assert rows * positions * per_position <= GROWN_SLOTS_SHARE * h100
    assert (rows + 128) * positions * per_position > GROWN_SLOTS_SHARE * h100  # the most that fit
    assert fitting_rows(1024, positions, per_position, a48) == 0  # 384 would fit: under half
    assert fitting_rows(1024, positions, per_position, small) == 0
    assert fitting_rows(300, positions, per_position, None) == 300  # a CPU: memory is not the limit


def test_the_device_time_lines_are_said_for_work_done_and_not_for_a_batch_spoken_already(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """A worker's task whose batch its stream spoke before the message came logs no device time
    (it said three lines of zeros per batch); one that spoke logs it."""
    from jobs.batches.speak import log_device_time

    engine.clock.reset()
    with caplog.at_level(logging.INFO, logger="jobs.batches.speak"):
        log_device_time("batch=7 (and the batches streamed after it)", engine)
        assert "device time" not in caplog.text
        engine.synthesize(requests_for(engine, greedy=True)[:2])
        log_device_time("batch=8 (and the batches streamed after it)", engine)
    assert re.search(r"batch=8 .*device time: prefill [\d.]+ s, [1-9]\d* decode steps", caplog.text)
    assert "batch=7" not in caplog.text

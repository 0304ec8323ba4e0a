"""On a GPU, CUDA-graph decode steps give the eager loop's tokens (fp16, a slot per row), and
continuous batching (fewer slots than rows, refilled) gives them in fp32: full-size synthetic
weights, greedy and sampled pools of mixed lengths. In fp16 a refill changes the batch's shape
step by step, which flips argmaxes on random weights' near-flat logits, so fp16 refills are
reported by ``python -m pipeline.bench graph-check``, not held to the eager tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.bench.graph_check import AGREEMENT_NEEDED, ONE_SLOT_PER_ROW, compare_ways, synthetic_engine

pytestmark = pytest.mark.gpu


def test_graph_steps_give_the_eager_tokens_in_fp16(tmp_path: Path) -> None:
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")

    ways = [way for way in compare_ways(engine, rows=256, slots=64) if way.label == ONE_SLOT_PER_ROW]

    assert [way.sampling for way in ways] == ["greedy", "sampled"]
    assert all(way.graphs_captured > 0 for way in ways)
    # fp16 batch-shape effects may flip a rare argmax; anything more is a wrong step
    assert not [way.line() for way in ways if way.agreement < AGREEMENT_NEEDED]


def test_refilled_slots_give_the_eager_tokens_in_fp32(tmp_path: Path) -> None:
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp32")

    ways = compare_ways(engine, rows=128, slots=32, longest=140)

    assert len(ways) == 4
    assert not [way.line() for way in ways if way.agreement < AGREEMENT_NEEDED]



@pytest.mark.parametrize(("switch", "value"), [("pipeline.engine.step_graphs.URGENT_STEPS", False),
                                               ("pipeline.engine.word_attention.ROPE_INSIDE", False),
                                               ("pipeline.engine.word_attention.STAGES", 1)])
def test_steps_the_other_way_give_the_eager_tokens_in_fp16(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           switch: str, value: object) -> None:
    """``TTS_JOBS_STEP_PRIORITY=0`` (replays on PyTorch's own stream), ``TTS_JOBS_ATTENTION_ROPE=0``
    (RoPE and the cache write in a kernel of their own) and ``TTS_JOBS_ATTENTION_STAGES=1`` (the
    word kernel's while loop): the same tokens as the defaults' way."""
    monkeypatch.setattr(switch, value)
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")

    ways = [way for way in compare_ways(engine, rows=256, slots=64) if way.label == ONE_SLOT_PER_ROW]

    assert all(way.graphs_captured > 0 for way in ways)
    assert not [way.line() for way in ways if way.agreement < AGREEMENT_NEEDED]


def test_steps_with_the_word_kernel_longest_slot_first_give_the_eager_tokens_in_fp16(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TTS_JOBS_ATTENTION_ORDER=1`` (a sort of the slots inside the captured graphs): the
    graph-replayed steps give the eager loop's tokens."""
    monkeypatch.setattr("pipeline.engine.word_attention.LONGEST_FIRST", True)
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")

    ways = [way for way in compare_ways(engine, rows=256, slots=64) if way.label == ONE_SLOT_PER_ROW]

    assert all(way.graphs_captured > 0 for way in ways)
    assert not [way.line() for way in ways if way.agreement < AGREEMENT_NEEDED]

"""The batch planner: pure logic, no torch."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys

import pytest

from pipeline.batching import MemoryModel, PlanLimits, plan_batches
from pipeline.types import PlannedSentence

MODEL = MemoryModel(fixed_bytes=1_000_000_000, bytes_per_row_position=160_000)


def book(count: int, seed: int = 0, priorities: tuple[int, ...] = (0,)) -> list[PlannedSentence]:
    """Sentences in book order: lengths of a real book's mix (10-60 characters -> 47-282 steps)."""
    rng = random.Random(seed)
    return [PlannedSentence(id=1000 + i, max_new_tokens=round(rng.randint(10, 60) * 4.7),
                            prompt_tokens=rng.randint(14, 70), priority=rng.choice(priorities))
            for i in range(count)]


def positions(s: PlannedSentence) -> int:
    return s.prompt_tokens + s.max_new_tokens


def test_every_sentence_lands_in_exactly_one_batch() -> None:
    sentences = book(1000)
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=8 * 2**30, max_rows=128), MODEL)
    planned = [i for b in batches for i in b.sentence_ids]
    assert sorted(planned) == sorted(s.id for s in sentences)
    assert len(planned) == len(set(planned))


def test_no_batch_exceeds_the_memory_cap_or_the_row_limit() -> None:
    cap = 4 * 2**30
    sentences = book(1000, seed=1)
    by_id = {s.id: s for s in sentences}
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=cap, max_rows=200), MODEL)
    for b in batches:
        rows = [by_id[i] for i in b.sentence_ids]
        longest = max(positions(s) for s in rows)
        assert MODEL.estimate(len(rows), longest) <= cap
        assert b.estimated_bytes == MODEL.estimate(len(rows), longest)
        assert len(rows) <= 200


def test_a_tighter_cap_gives_smaller_batches() -> None:
    sentences = book(600, seed=2)
    loose = plan_batches(sentences, PlanLimits(memory_cap_bytes=16 * 2**30, max_rows=512), MODEL)
    tight = plan_batches(sentences, PlanLimits(memory_cap_bytes=2 * 2**30, max_rows=512), MODEL)
    assert len(tight) > len(loose)


def test_book_order_is_restorable_from_the_ids() -> None:
    sentences = book(300, seed=3)
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=2 * 2**30, max_rows=64), MODEL)
    # What a worker does: synthesise batch by batch, then put results back by id.
    results = {i: f"audio-{i}" for b in batches for i in b.sentence_ids}
    assert [results[s.id] for s in sentences] == [f"audio-{s.id}" for s in sentences]


def test_padding_stays_small_because_batches_hold_similar_lengths() -> None:
    sentences = book(1024, seed=4)
    by_id = {s.id: s for s in sentences}
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=64 * 2**30, max_rows=256), MODEL)
    useful = sum(positions(s) for s in sentences)
    padded = sum(len(b.sentence_ids) * max(positions(by_id[i]) for i in b.sentence_ids)
                 for b in batches)
    assert padded / useful < 1.25
    # Book order without sorting would waste far more: the point of the global sort.
    unsorted = sum(len(chunk) * max(positions(s) for s in chunk)
                   for chunk in (sentences[i:i + 256] for i in range(0, len(sentences), 256)))
    assert unsorted / useful > 1.4


def test_higher_priority_goes_first_and_never_shares_a_batch() -> None:
    sentences = book(400, seed=5, priorities=(0, 5))
    by_id = {s.id: s for s in sentences}
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=8 * 2**30, max_rows=64), MODEL)
    classes = [{by_id[i].priority for i in b.sentence_ids} for b in batches]
    assert all(len(c) == 1 for c in classes)
    order = [c.pop() for c in classes]
    assert order == sorted(order, reverse=True)


def test_a_sentence_too_large_alone_gets_a_batch_of_its_own() -> None:
    huge = PlannedSentence(id=1, max_new_tokens=2048, prompt_tokens=50)
    small = [PlannedSentence(id=2 + i, max_new_tokens=50, prompt_tokens=20) for i in range(5)]
    cap = MODEL.estimate(1, 500)
    batches = plan_batches([huge, *small], PlanLimits(memory_cap_bytes=cap, max_rows=64), MODEL)
    assert (1,) in [b.sentence_ids for b in batches]
    assert sorted(i for b in batches for i in b.sentence_ids) == list(range(1, 7))


def test_no_sentences_no_batches() -> None:
    assert plan_batches([], PlanLimits(memory_cap_bytes=2**30)) == []


@pytest.mark.parametrize("count", [1, 2, 257])
def test_row_limit_splits_even_when_memory_is_plentiful(count: int) -> None:
    sentences = [PlannedSentence(id=i, max_new_tokens=100, prompt_tokens=20) for i in range(count)]
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=2**40, max_rows=256), MODEL)
    assert [len(b.sentence_ids) for b in batches] == [min(count, 256)] + (
        [count - 256] if count > 256 else [])


def test_planning_never_imports_torch() -> None:
    code = "import sys, pipeline.batching, pipeline.lengths; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_batches_run_longest_first_within_each_priority_class() -> None:
    """Longest-processing-time order: with two GPU workers the long batches start first, so the
    two finish together instead of one ending the longest batch alone."""
    sentences = [PlannedSentence(id=i, max_new_tokens=50 + 10 * i, prompt_tokens=20,
                                 priority=1 if i % 4 == 0 else 0) for i in range(40)]
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=2**40, max_rows=5), MODEL)
    by_id = {s.id: s for s in sentences}
    classes = [by_id[b.sentence_ids[0]].priority for b in batches]
    assert classes == sorted(classes, reverse=True)  # the urgent class still goes first
    for wanted in (1, 0):
        longest = [max(by_id[i].max_new_tokens for i in b.sentence_ids)
                   for b, c in zip(batches, classes) if c == wanted]
        assert longest == sorted(longest, reverse=True) and len(longest) > 1
    assert sorted(i for b in batches for i in b.sentence_ids) == list(range(40))


def test_the_part_batch_left_over_holds_the_shortest_sentences() -> None:
    """Cut from the long end: the longest sentences fill whole batches, and what is left over
    (5,000 = 4 x 1,024 + 904) is the quickest batch, not a third-full batch of the longest."""
    sentences = book(5000)
    batches = plan_batches(sentences, PlanLimits(memory_cap_bytes=2**40, max_rows=1024), MODEL)
    assert [len(b.sentence_ids) for b in batches] == [1024, 1024, 1024, 1024, 904]
    by_id = {s.id: s for s in sentences}
    spans = [[positions(by_id[i]) for i in b.sentence_ids] for b in batches]
    assert all(min(longer) >= max(shorter) for longer, shorter in zip(spans, spans[1:]))


def test_with_several_workers_the_last_batches_run_as_pieces_of_the_same_lengths() -> None:
    """Two GPU workers: the last two (shortest) batches are cut into pieces of ~128 rows (what a
    streaming worker admits at once), so neither worker waits long for the other at the end; one
    worker keeps whole batches, and so do batches that another book's will follow."""
    sentences = book(5000)
    limits = PlanLimits(memory_cap_bytes=2**40, max_rows=1024)
    whole = plan_batches(sentences, limits, MODEL)
    shared = plan_batches(sentences, dataclasses.replace(limits, workers=2), MODEL)
    assert [len(b.sentence_ids) for b in shared] == [1024, 1024, 1024] + [128] * 8 + [130] + [129] * 6
    assert shared[:3] == whole[:3]
    assert sorted(i for b in shared for i in b.sentence_ids) == sorted(s.id for s in sentences)
    by_id = {s.id: s for s in sentences}
    for pieces in (shared[3:11], shared[11:18]):
        longest = [max(positions(by_id[i]) for i in piece.sentence_ids) for piece in pieces]
        assert max(longest) - min(longest) <= 8  # every n-th sentence: pieces of equal length
        assert pieces[0].estimated_bytes == MODEL.estimate(len(pieces[0].sentence_ids), longest[0])
    more_to_come = dataclasses.replace(limits, workers=2, ends_queue=False)
    assert plan_batches(sentences, more_to_come, MODEL) == whole



def test_the_first_batch_takes_the_shortest_sentences_as_its_lead() -> None:
    """A book's first wave: its first batch (the longest sentences, run first) also carries its
    shortest ones, so the first sentence spoken is a short one; every sentence still once, the
    first batch within the rows and the cap, padded to the same longest sentence."""
    sentences = book(3000, seed=4)
    cap = 40 * 2**30
    plain = plan_batches(sentences, PlanLimits(memory_cap_bytes=cap, max_rows=1024), MODEL)
    led = plan_batches(sentences, PlanLimits(memory_cap_bytes=cap, max_rows=1024, lead_rows=16), MODEL)

    shortest = sorted(sentences, key=lambda s: (positions(s), -s.id))[:16]
    assert {s.id for s in shortest} <= set(led[0].sentence_ids)
    assert not {s.id for s in shortest} & set(plain[0].sentence_ids)
    assert len(led[0].sentence_ids) <= 1024 and led[0].estimated_bytes <= cap
    assert led[0].longest_positions == plain[0].longest_positions == max(positions(s) for s in sentences)
    planned = [i for b in led for i in b.sentence_ids]
    assert sorted(planned) == sorted(s.id for s in sentences)


def test_the_lead_comes_from_the_first_priority_class_and_only_where_it_helps() -> None:
    urgent_first = book(400, seed=5, priorities=(0, 3))
    led = plan_batches(urgent_first, PlanLimits(memory_cap_bytes=None, max_rows=64, lead_rows=8), MODEL)
    urgent = sorted((s for s in urgent_first if s.priority == 3), key=lambda s: (positions(s), -s.id))
    assert {s.id for s in urgent[:8]} <= set(led[0].sentence_ids)
    assert {by.priority for by in urgent_first if by.id in led[0].sentence_ids} == {3}

    few = book(20, seed=6)  # one batch holds them all: nothing to lead
    assert [b.sentence_ids for b in plan_batches(few, PlanLimits(None, max_rows=64, lead_rows=16))] == \
        [b.sentence_ids for b in plan_batches(few, PlanLimits(None, max_rows=64))]
    small_batches = plan_batches(book(400, seed=7), PlanLimits(None, max_rows=16, lead_rows=16))
    assert all(len(b.sentence_ids) <= 16 for b in small_batches)  # a lead is at most a quarter of a batch

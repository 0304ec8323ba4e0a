"""The scheduling policy: one owner that the planner, the queue order and the engine's admission
all ask — changing a knob there changes what each of them does."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pipeline.batching import MemoryModel, PlanLimits, plan_batches
from pipeline.scheduling import CPU_BATCH_ROWS, GPU_BATCH_ROWS, QueueKey, SchedulingPolicy
from pipeline.types import Batch, PlannedSentence


def _sentences(lengths: list[int], priority: int = 0) -> list[PlannedSentence]:
    return [PlannedSentence(id=i, max_new_tokens=n, prompt_tokens=10, priority=priority)
            for i, n in enumerate(lengths, start=1)]


def test_the_policy_is_sized_from_the_device_and_what_it_learned() -> None:
    assert SchedulingPolicy.for_device(gpu=True).batch_rows == GPU_BATCH_ROWS
    assert SchedulingPolicy.for_device(gpu=False).batch_rows == CPU_BATCH_ROWS
    assert SchedulingPolicy.for_device(gpu=True, batch_rows=300).batch_rows == 300
    card = SchedulingPolicy.for_device(gpu=True, memory_cap_bytes=8 * 2**30)
    assert card.memory_cap_bytes == 8 * 2**30
    assert card.with_learned_rows(200).batch_rows == 200  # halved to 200 once: never planned larger
    assert card.with_learned_rows(None) == card


def test_no_card_is_assumed_before_a_worker_has_measured_one() -> None:
    """With no memory cap known, batches are cut by rows alone (the worker halves what does not
    fit and records it); with a cap, the memory model cuts them."""
    sentences = _sentences([300] * 40)
    unknown = PlanLimits.of(SchedulingPolicy.for_device(gpu=True, batch_rows=16))
    assert unknown.memory_cap_bytes is None
    assert [len(b.sentence_ids) for b in plan_batches(sentences, unknown)] == [16, 16, 8]
    model = MemoryModel(fixed_bytes=0, bytes_per_row_position=1)
    small = PlanLimits.of(SchedulingPolicy.for_device(gpu=True, memory_cap_bytes=310 * 5, batch_rows=16))
    assert {len(b.sentence_ids) for b in plan_batches(sentences, small, model)} == {5}


def test_the_queue_end_pieces_follow_the_policy() -> None:
    """With several workers the queue's last batch runs as pieces of the policy's size."""
    sentences = _sentences([100 + i for i in range(600)])
    policy = SchedulingPolicy(batch_rows=600)

    def pieces(policy: SchedulingPolicy, workers: int = 2) -> list[int]:
        return [len(b.sentence_ids) for b in plan_batches(sentences, PlanLimits.of(policy, workers))]

    assert pieces(policy) == [150] * 4  # pieces of at least 128 rows
    assert pieces(replace(policy, piece_rows=300)) == [300, 300]
    assert pieces(replace(policy, piece_rows=400)) == [600]  # not two pieces' worth: kept whole
    assert pieces(policy, workers=1) == [600]  # one worker runs whole batches


def test_admission_waits_for_a_group_only_while_rows_run_and_more_are_coming() -> None:
    policy = SchedulingPolicy(admit_share=8)
    assert policy.admit_at(1024) == 128 and policy.admit_at(4) == 1
    assert policy.admission_can_wait(take=10, free=10, capacity=1024, more_coming=True)
    assert not policy.admission_can_wait(take=10, free=10, capacity=1024, more_coming=False)
    assert not policy.admission_can_wait(take=128, free=128, capacity=1024, more_coming=True)
    assert not policy.admission_can_wait(take=10, free=1024, capacity=1024, more_coming=True)  # idle
    eager = SchedulingPolicy(admit_share=1024)
    assert not eager.admission_can_wait(take=1, free=1, capacity=1024, more_coming=True)


def test_the_engine_loop_admits_as_the_policy_says() -> None:
    """A stream fetches its next group once the policy's admission share of slots is free."""
    from pipeline.engine.streaming import RequestStream

    def fetches_at(free: int, policy: SchedulingPolicy) -> bool:
        asked: list[int] = []
        stream = RequestStream(None, lambda: asked.append(1), 1024, [], 0,  # type: ignore[arg-type]
                               policy=policy)
        stream.poll(free, lambda group: True)
        stream.close()
        return bool(asked)

    assert not fetches_at(64, SchedulingPolicy(admit_share=8))
    assert fetches_at(64, SchedulingPolicy(admit_share=16))


def test_a_batch_is_suspect_when_a_death_was_its_doing_or_it_was_in_two() -> None:
    policy = SchedulingPolicy(suspect_after_deaths=2)
    assert not policy.is_suspect(holder_deaths=1, solo_deaths=0)  # one of a stream's batches
    assert policy.is_suspect(holder_deaths=1, solo_deaths=1)  # it alone was held
    assert policy.is_suspect(holder_deaths=2, solo_deaths=0)


def test_a_deep_queue_is_the_policys() -> None:
    assert SchedulingPolicy(deep_queue=4).queue_is_deep(5)
    assert not SchedulingPolicy(deep_queue=4).queue_is_deep(4)
    assert SchedulingPolicy().waves(assemble_ahead=False) == 1
    assert SchedulingPolicy(waves_per_book=3).waves() == 3


def test_the_queue_hands_out_batches_in_the_policys_order(database_url: str) -> None:
    """Plan after plan by default (an older plan's short batch before a newer plan's long one);
    a policy that puts the longest first changes that, in one place."""
    from storage import repo
    from storage.db import make_engine, make_session_factory
    from storage.models import utcnow

    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        planned_at = utcnow()
        old = repo.create_batches(session, [Batch(sentence_ids=(), estimated_bytes=0, longest_positions=50)],
                                  planned_at=planned_at)
        new = repo.create_batches(session, [Batch(sentence_ids=(), estimated_bytes=0, longest_positions=500)],
                                  planned_at=planned_at + timedelta(seconds=1))
        session.commit()
        assert repo.next_queued_batch(session, suspects=True) == old[0].id
        longest_first = (QueueKey.PRIORITY, QueueKey.LONGEST, QueueKey.PLAN, QueueKey.OLDEST)
        policy = replace(SchedulingPolicy(), queue_order=longest_first)
        assert repo.next_queued_batch(session, suspects=True, policy=policy) == new[0].id
    engine.dispose()


def test_a_dead_streams_batches_go_back_in_their_place_and_stream_again(database_url: str) -> None:
    """A stream holding the first book's batches dies (not their doing): they go back before a
    later book's batches and a new stream takes them; a batch in a second dying holder, or one
    that died alone, is left for a task of its own."""
    from sqlalchemy import update

    from storage import repo
    from storage.db import make_engine, make_session_factory
    from storage.models import Batch as BatchRow
    from storage.models import utcnow

    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        first = repo.create_batches(session, [Batch(sentence_ids=(), estimated_bytes=0, longest_positions=300)] * 3,
                                    planned_at=utcnow())
        later = repo.create_batches(session, [Batch(sentence_ids=(), estimated_bytes=0, longest_positions=900)],
                                    planned_at=utcnow() + timedelta(seconds=1))
        for batch in first:
            repo.claim_batch(session, batch.id, "host:1", lease_seconds=60)
        assert repo.return_dead_holders_batches(session, "host:1", its_doing=True) == [b.id for b in first]
        session.commit()
        assert repo.next_queued_batch(session) == first[0].id  # streamable, in its place
        session.execute(update(BatchRow).where(BatchRow.id == first[0].id).values(holder_deaths=2))
        session.execute(update(BatchRow).where(BatchRow.id == first[1].id).values(solo_deaths=1))
        session.commit()
        assert repo.next_queued_batch(session) == first[2].id
        assert repo.next_queued_batch(session, suspects=True) == first[0].id  # a task's own first
        assert later[0].id != repo.next_queued_batch(session)
    engine.dispose()

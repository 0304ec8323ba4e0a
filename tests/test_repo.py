"""Job-table rules that several workers rely on, checked on SQLite and on the real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from pipeline.types import Batch as PlannedBatch
from storage import repo
from storage.db import make_engine, make_session_factory
from storage.models import Batch, BatchState, Chapter, Job, JobState, Sentence, SentenceState, utcnow


@pytest.fixture()
def sessions(database_url: str):  # type: ignore[no-untyped-def]
    engine = make_engine(database_url)
    yield make_session_factory(engine)
    engine.dispose()


def _job_with_sentences(session: Session, n: int, state: JobState = JobState.SYNTHESIZING) -> Job:
    job = Job(source_name="b.txt", source_path="jobs/1/source.txt", source_sha256="0" * 64,
              book_format="txt", title="B", voice_name="default", voice_embedding="seed:1",
              state=state.value)
    session.add(job)
    session.flush()
    rows = [repo.NewSentence(index=i, paragraph_index=0, text=f"sentence {i}", seed=i,
                             min_new_tokens=1, max_new_tokens=10 + i) for i in range(n)]
    repo.add_chapters(session, job.id, [(0, "One", rows)])
    session.flush()
    return job


def test_a_batch_is_leased_once_and_taken_over_only_after_its_lease_expires(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        job = _job_with_sentences(s, 3)
        [batch] = repo.create_batches(s, [PlannedBatch(tuple(x.id for x in repo.unplanned_sentences(s)), 1)])
        s.commit()
        batch_id = batch.id
    with sessions() as s:
        assert repo.claim_batch(s, batch_id, "gpu0", lease_seconds=60) is not None
        s.commit()
    with sessions() as s:  # a duplicate delivery while gpu0 is alive
        assert repo.claim_batch(s, batch_id, "gpu1", lease_seconds=60) is None
        s.commit()
    later = utcnow() + timedelta(seconds=120)
    with sessions() as s:  # gpu0 went silent: its lease expired
        claimed = repo.claim_batch(s, batch_id, "gpu1", lease_seconds=60, now=later)
        assert claimed is not None and claimed.leased_by == "gpu1" and claimed.attempts == 2
        s.commit()
    with sessions() as s:
        assert not repo.holds_lease(s, batch_id, "gpu0")
        assert repo.holds_lease(s, batch_id, "gpu1")
        repo.finish_batch(s, batch_id)
        s.commit()
    with sessions() as s:  # finished batches are never claimed again
        assert repo.claim_batch(s, batch_id, "gpu2", lease_seconds=60, now=later + timedelta(hours=1)) is None
        assert len(repo.batch_pending_sentences(s, batch_id)) == 3
        assert repo.batch_job_ids(s, batch_id) == [job.id]


def test_planned_sentences_are_not_planned_again(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        _job_with_sentences(s, 4)
        first = repo.unplanned_sentences(s)
        repo.create_batches(s, [PlannedBatch(tuple(x.id for x in first[:2]), 1)])
        s.commit()
    with sessions() as s:
        rest = repo.unplanned_sentences(s)
        assert [x.id for x in rest] == [x.id for x in first[2:]]
        assert [x.text for x in rest] == ["sentence 2", "sentence 3"]


def test_only_synthesizing_jobs_are_planned(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        _job_with_sentences(s, 2, state=JobState.CANCELLED)
        s.commit()
        assert repo.unplanned_sentences(s) == []


def test_progress_counts_done_failed_and_audio(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        job = _job_with_sentences(s, 3)
        rows = list(s.scalars(select(Sentence).where(Sentence.job_id == job.id)
                              .order_by(Sentence.id)))
        repo.record_spoken_sentences(s, [repo.SpokenSentence(rows[0].id, "a.wav", 1.5, 70, hit_limit=True)])
        repo.fail_sentence(s, rows[1], "boom")
        s.commit()
        assert repo.sentence_states(s, [r.id for r in rows] + [10**9]) == {
            rows[0].id: SentenceState.DONE.value, rows[1].id: SentenceState.FAILED.value,
            rows[2].id: SentenceState.PENDING.value}
        assert (rows[0].audio_path, rows[0].gpt_steps) == ("a.wav", 70)
        p = repo.job_progress(s, [job.id])[job.id]
        assert (p.total, p.done, p.failed, p.hit_limit) == (3, 1, 1, 1)
        assert p.audio_seconds == pytest.approx(1.5)
        assert repo.reset_failed_sentences(s, job.id) == 2
        s.commit()
        assert [r.state for r in repo.chapter_sentences(s, rows[0].chapter_id)] == [
            SentenceState.DONE.value, SentenceState.PENDING.value, SentenceState.PENDING.value]


def test_the_read_along_reads_the_recorded_sentences_of_every_chapter_in_reading_order(sessions) -> None:  # type: ignore[no-untyped-def]
    """What a read-along's timings are made from: each spoken sentence's chapter and place, its
    words and its audio, chapters in the book's order whatever order they were recorded in; a
    sentence not spoken (yet, or failed) is left out."""
    with sessions() as s:
        job = _job_with_sentences(s, 2)
        later = [repo.NewSentence(index=i, paragraph_index=0, text=f"later {i}", seed=i, min_new_tokens=1,
                                  max_new_tokens=10) for i in range(3)]
        repo.add_chapters(s, job.id, [(1, "Two", later)])
        s.flush()
        rows = {(r.chapter_id, r.index): r for r in s.scalars(select(Sentence).where(Sentence.job_id == job.id))}
        chapters = {c.index: c.id for c in repo.job_chapters(s, job.id)}
        spoken = [(1, 2), (1, 0), (0, 1)]  # recorded out of order; (0, 0) and (1, 1) never spoken
        repo.record_spoken_sentences(s, [repo.SpokenSentence(rows[chapters[c], i].id, f"jobs/1/{c}-{i}.wav", 1.0, 5, hit_limit=False)
                                         for c, i in spoken])
        s.commit()
        assert repo.job_recorded_words(s, job.id) == [
            (0, 1, "sentence 1", "jobs/1/0-1.wav"), (1, 0, "later 0", "jobs/1/1-0.wav"),
            (1, 2, "later 2", "jobs/1/1-2.wav")]


def test_a_state_change_happens_once(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        job = _job_with_sentences(s, 1)
        s.commit()
        assert repo.move_job(s, job.id, JobState.ASSEMBLING, only_from=[JobState.SYNTHESIZING])
        assert not repo.move_job(s, job.id, JobState.ASSEMBLING, only_from=[JobState.SYNTHESIZING])
        s.commit()


def test_a_streaming_worker_takes_the_highest_priority_then_the_earlier_plan_longest_first(sessions) -> None:  # type: ignore[no-untyped-def]
    """Plans (books read at different times) run in the order they were made, so each book
    finishes while the next is spoken; within a plan the longest rows start first."""
    with sessions() as s:
        _job_with_sentences(s, 6)
        ids = [x.id for x in repo.unplanned_sentences(s)]
        first_plan = utcnow()
        later_long, later_short = repo.create_batches(s, [
            PlannedBatch((ids[0],), 1, longest_positions=900),
            PlannedBatch((ids[1],), 1, longest_positions=100)], planned_at=first_plan + timedelta(seconds=1))
        earlier_short, earlier_long, earlier_twin = repo.create_batches(s, [
            PlannedBatch((ids[2],), 1, longest_positions=100),
            PlannedBatch((ids[3],), 1, longest_positions=500),
            PlannedBatch((ids[4],), 1, longest_positions=500)], planned_at=first_plan)
        [urgent_short] = repo.create_batches(s, [
            PlannedBatch((ids[5],), 1, longest_positions=50, priority=1)], planned_at=first_plan + timedelta(seconds=2))
        s.commit()
        order = []
        while (batch_id := repo.next_queued_batch(s)) is not None:
            order.append(batch_id)
            assert repo.claim_batch(s, batch_id, "host:1", 60) is not None
        s.commit()
    assert order == [urgent_short.id, earlier_long.id, earlier_twin.id, earlier_short.id,
                     later_long.id, later_short.id]


def test_an_embedded_run_takes_only_its_own_books_batches(sessions) -> None:  # type: ignore[no-untyped-def]
    """Another book's queued batches (an interrupted run's, say) wait in the same database: the
    queue seen for one job holds its own batches only, in the usual order, and counts them."""
    with sessions() as s:
        other, mine = _job_with_sentences(s, 2), _job_with_sentences(s, 2)
        theirs = [x.id for x in repo.unplanned_sentences(s, [other.id])]
        ours = [x.id for x in repo.unplanned_sentences(s, [mine.id])]
        first_plan = utcnow()
        their_long, = repo.create_batches(s, [PlannedBatch(tuple(theirs), 1, longest_positions=900)],
                                          planned_at=first_plan)
        our_short, our_long = repo.create_batches(s, [PlannedBatch((ours[0],), 1, longest_positions=100),
                                                      PlannedBatch((ours[1],), 1, longest_positions=500)],
                                                  planned_at=first_plan + timedelta(seconds=1))
        s.commit()
        assert repo.next_queued_batch(s) == their_long.id
        assert repo.queued_batch_count(s) == 3 and repo.queued_batch_count(s, mine.id) == 2
        assert repo.queued_batch_shape(s, mine.id) == (1, 500)  # what its decode slots must hold
        assert repo.longest_pending_sentence(s, mine.id) == 11
        order = []
        while (batch_id := repo.next_queued_batch(s, job_id=mine.id)) is not None:
            order.append(batch_id)
            assert repo.claim_batch(s, batch_id, "host:1", 60) is not None
        s.commit()
        assert order == [our_long.id, our_short.id]
        assert repo.queued_batch_count(s, mine.id) == 0 and repo.next_queued_batch(s) == their_long.id


def test_stale_batches_are_found(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        _job_with_sentences(s, 1)
        [b] = repo.create_batches(s, [PlannedBatch(tuple(x.id for x in repo.unplanned_sentences(s)), 1)])
        s.commit()
        repo.claim_batch(s, b.id, "gpu0", lease_seconds=30)
        s.commit()
        assert repo.stale_batches(s, 30) == []
        assert repo.stale_batches(s, 30, now=utcnow() + timedelta(seconds=31)) == [b.id]
        assert b.state == BatchState.RUNNING.value


def test_two_planners_on_postgresql_never_take_the_same_sentence(pg_database: str) -> None:
    """SKIP LOCKED: a second planner skips the rows the first holds instead of planning them twice.

    PostgreSQL only: SQLite has a single writer, and SQLAlchemy drops FOR UPDATE there.
    """
    from storage.db import upgrade
    from tests.conftest import wipe_tables

    upgrade(pg_database)
    engine = make_engine(pg_database)
    sessions = make_session_factory(engine)
    with sessions() as s:
        _job_with_sentences(s, 5)
        s.commit()
    first, second = sessions(), sessions()
    try:
        held = repo.unplanned_sentences(first)  # the first planner holds the row locks
        assert len(held) == 5
        assert repo.unplanned_sentences(second) == []
        repo.create_batches(first, [PlannedBatch(tuple(x.id for x in held), 1)])
        first.commit()
        second.rollback()
        assert repo.unplanned_sentences(second) == []
    finally:
        first.close()
        second.close()
        engine.dispose()
        wipe_tables(pg_database)


TRICKY_TEXTS = ["Plain.", "It's 100% \"quoted\", %s and %(x)s; back\\slash.", "第二章的句子。", "Tab\there, emoji 🎧.",
                "Line\nbreak."]


def test_recorded_sentences_are_the_rows_sqlalchemy_would_write(sessions) -> None:  # type: ignore[no-untyped-def]
    """The driver-level executemany writes the same rows as SQLAlchemy's own insert (defaults too)."""
    columns = [c for c in Sentence.__table__.c if c.key not in ("id", "chapter_id")]
    rows = [repo.NewSentence(index=i, paragraph_index=i - 1, text=text, seed=2**31 - 1 - i,
                             min_new_tokens=i, max_new_tokens=100 + i) for i, text in enumerate(TRICKY_TEXTS)]
    with sessions() as s:
        job = _job_with_sentences(s, 0)
        first, second = repo.add_chapters(s, job.id, [(1, "First", rows), (2, "Second", rows[:2])])
        reference = Chapter(job_id=job.id, index=3, title="Reference")
        s.add(reference)
        s.flush()
        s.execute(insert(Sentence), [
            {"job_id": job.id, "chapter_id": reference.id, "index": r.index, "paragraph_index": r.paragraph_index,
             "text": r.text, "seed": r.seed, "min_new_tokens": r.min_new_tokens, "max_new_tokens": r.max_new_tokens}
            for r in rows])
        s.commit()
        assert [(c.index, c.title) for c in repo.job_chapters(s, job.id)] == [
            (0, "One"), (1, "First"), (2, "Second"), (3, "Reference")]

        def stored(chapter_id: int) -> list[tuple]:
            return [tuple(r) for r in s.execute(select(*columns).where(Sentence.chapter_id == chapter_id)
                                                .order_by(Sentence.index))]

        assert stored(first.id) == stored(reference.id)
        assert stored(second.id) == stored(reference.id)[:2]
        assert stored(first.id)[1][columns.index(Sentence.__table__.c.text)] == TRICKY_TEXTS[1]
        [sentence] = [x for x in repo.chapter_sentences(s, first.id) if x.index == 0]
        assert (sentence.state, sentence.hit_limit, sentence.attempts, sentence.batch_id) == (
            SentenceState.PENDING.value, False, 0, None)


def test_batches_are_recorded_in_plan_order_holding_exactly_their_sentences(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        _job_with_sentences(s, 60)
        ids = [x.id for x in repo.unplanned_sentences(s)]
        scrambled = ids[::-2] + ids[::2]
        sizes = [1, 7, 2, 16, 3, 5, 4, 11, 6, 5]
        plan, start = [], 0
        for n, size in enumerate(sizes):
            plan.append(PlannedBatch(tuple(scrambled[start:start + size]), estimated_bytes=10**10 + n,
                                     priority=n % 3, longest_positions=900 - n))
            start += size
        batches = repo.create_batches(s, plan)
        s.commit()
        assert [b.id for b in batches] == sorted(b.id for b in batches)
        stored = {b.id: b for b in s.scalars(select(Batch))}
        for batch, planned in zip(batches, plan):
            row = stored[batch.id]
            assert (row.size, row.estimated_bytes, row.priority, row.longest_positions, row.state, row.attempts) == (
                len(planned.sentence_ids), planned.estimated_bytes, planned.priority, planned.longest_positions,
                BatchState.QUEUED.value, 0)
            held = s.scalars(select(Sentence.id).where(Sentence.batch_id == batch.id))
            assert sorted(held) == sorted(planned.sentence_ids)
        assert [x.id for x in repo.unplanned_sentences(s)] == sorted(scrambled[start:])


def test_a_planned_sentence_is_never_moved_to_another_batch(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions() as s:
        _job_with_sentences(s, 3)
        a, b, c = (x.id for x in repo.unplanned_sentences(s))
        first, second = repo.create_batches(s, [PlannedBatch((a, b), 1), PlannedBatch((b, c), 1)])
        s.commit()
        held = dict(s.execute(select(Sentence.id, Sentence.batch_id)).all())
        assert held == {a: first.id, b: first.id, c: second.id}

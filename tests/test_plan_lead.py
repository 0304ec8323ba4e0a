"""A book's first batch leads with short sentences: the run's first sentence is spoken after a
short sentence's steps, not after the shortest of a GPU batch of the book's longest (on an H200
~250 steps, ~0.9 s, while the person who started the run waits). The real planner and database."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.plan import plan_pending
from jobs.runtime import Runtime, open_runtime
from jobs.submit import submit_book
from storage import repo
from tests.books import write_epub

# three chapters of 30 sentences from 2 to 31 words: each a wave of the book, three batches each
WORDS = "one two three four five six seven eight nine ten".split()
CHAPTERS = [(f"Chapter {c}", [" ".join(WORDS[k % 10] for k in range(2 + (i * 7 + n) % 30)).capitalize() + "."
                              for i in range(30)]) for n, c in enumerate("ABC")]


@pytest.fixture()
def rt(settings_factory, database_url: str) -> Runtime:  # type: ignore[no-untyped-def]
    return open_runtime(settings_factory(database_url, max_batch=12), upgrade_schema=False)


def test_the_first_batch_spoken_holds_the_first_waves_shortest_sentences(rt: Runtime, tmp_path: Path) -> None:
    job_id = submit_book(rt, write_epub(tmp_path / "book.epub", "Lead", CHAPTERS), JobOptions(formats=("m4b",)))
    assert ingest_job(rt, job_id)
    plan_pending(rt)

    with rt.read_session() as session:
        first = repo.next_queued_batch(session, job_id=job_id)
        assert first is not None
        batches = {b: repo.batch_pending_sentences(session, b) for b in repo.queued_batches(session)}
    by_chapter: dict[int, list] = {}
    for sentences in batches.values():
        for s in sentences:
            by_chapter.setdefault(s.chapter_id, []).append(s)
    opening = min(by_chapter)  # the first chapter: the first wave
    shortest = sorted(by_chapter[opening], key=lambda s: len(s.text))[:3]  # a batch of 12: a lead of 3
    longest = max(by_chapter[opening], key=lambda s: len(s.text))
    first_ids = {s.id for s in batches[first]}
    assert {s.id for s in shortest} <= first_ids and longest.id in first_ids
    assert len(first_ids) <= 12
    # the later waves' first batches are their longest sentences alone
    for chapter, sentences in by_chapter.items():
        if chapter == opening:
            continue
        holding_longest = next(ids for ids in ({s.id for s in b} for b in batches.values())
                               if max(sentences, key=lambda s: len(s.text)).id in ids)
        assert not {s.id for s in sorted(sentences, key=lambda s: len(s.text))[:3]} & holding_longest

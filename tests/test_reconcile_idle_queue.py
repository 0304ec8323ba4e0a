"""A queue stalled by a lost message (batches queued, none running, none sent for a while: the
worker that took the message was killed before it claimed the batch) is woken by the sweeper
within about a minute, not left to Redis's visibility timeout; a message still on its way is not
sent twice."""

from __future__ import annotations

from datetime import timedelta

from jobs.cluster.reconcile import stranded_work
from jobs.runtime import Runtime
from pipeline.types import Batch as PlannedBatch
from storage import repo
from storage.models import utcnow
from tests.test_repo import _job_with_sentences


def test_a_queue_whose_message_was_lost_is_woken_within_a_minute(rt: Runtime) -> None:
    with rt.session() as session:
        _job_with_sentences(session, 3)
        ids = tuple(s.id for s in repo.unplanned_sentences(session))
        [batch] = repo.create_batches(session, [PlannedBatch(ids, 1)])
        sent = utcnow()
        repo.mark_batches_sent(session, [batch.id], sent)
        session.commit()
        batch_id = batch.id

    assert stranded_work(rt, now=sent + timedelta(seconds=20)).batches == []  # may still be on its way
    assert stranded_work(rt, now=sent + timedelta(seconds=65)).batches == [batch_id]
    assert stranded_work(rt, now=sent + timedelta(seconds=70)).batches == []  # sent again just now

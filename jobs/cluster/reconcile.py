"""The reconciler: every live worker's sweep finds work that nothing will move and sends its
message again — whatever the timing of a kill, no commit → publish gap strands a job.

What it finds:

- running batches whose holder is gone (a dead pid on this host at once, elsewhere once the
  lease ran out): back to the queue, the death counted against each, and resent;
- queued batches whose message was never sent (a kill between their plan's commit and the send);
- a queue with batches and nothing running, no message sent for a while (lost messages);
- jobs waiting to be read, or being assembled, with no live holder: resent once their holder is
  gone, or once the stage's message is older than a back-off (it may still wait in a deep queue);
- jobs being spoken with sentences no batch holds (a planner that died): the plan message.

Each resend is marked first with one conditional UPDATE (``sent_at``), so of several sweepers
only one sends it, and the back-off doubles with every resend of the same job: the broker is
never flooded. Redis's visibility timeout still redelivers what a dead worker had taken, hours
later; those deliveries find the work done or held and do nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobs.leases import holder_gone, return_batches_of_gone_holders
from jobs.runtime import Runtime
from storage import repo
from storage.models import Job, JobState, utcnow

log = logging.getLogger(__name__)

# A message follows its commit within milliseconds; past this it never went out. A shorter lease
# (TTS_JOBS_LEASE_SECONDS) shortens it with the sweeps' pace: a quarter of the lease, at most this.
GRACE_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 3600.0
# Queued batches, none running, no send for this long: wake a worker. A worker claims a batch
# within seconds of its message (a model loads in ~10-20 s); a message lost with a killed worker
# before it claimed the batch left the queue stalled for all of the 300 s this was (a soak once
# took 329 s). A wake too early costs a duplicate message, which the claim turns away.
IDLE_QUEUE_SECONDS = 60.0


@dataclass
class Resends:
    """The messages one sweep sends again."""

    ingest: list[int] = field(default_factory=list)  # job ids
    plan: list[int] = field(default_factory=list)  # job ids with unplanned sentences
    batches: list[int] = field(default_factory=list)
    assemble: list[int] = field(default_factory=list)  # job ids

    def __bool__(self) -> bool:
        return bool(self.ingest or self.plan or self.batches or self.assemble)


def stranded_work(rt: Runtime, now: datetime | None = None) -> Resends:
    """What to send again now (each item already marked as sent: send it, once)."""
    now = now or utcnow()
    returned = return_batches_of_gone_holders(rt)
    resends = Resends(batches=returned)
    grace = now - timedelta(seconds=grace_seconds(rt))
    with rt.session() as session:
        repo.mark_batches_sent(session, returned, now)
        resends.batches += repo.claim_unsent_batches(session, grace)
        resends.batches += _wake_an_idle_queue(session, now, resends.batches)
        for job in repo.cluster_jobs_in(session, (JobState.QUEUED, JobState.INGESTING, JobState.ASSEMBLING)):
            if _stage_due(rt, session, job, now):
                (resends.assemble if job.job_state == JobState.ASSEMBLING else resends.ingest).append(job.id)
        for job_id in repo.jobs_with_unplanned_sentences(session):
            if repo.mark_job_sent(session, job_id, unless_since=_backoff_start(rt, now, 0)):
                resends.plan.append(job_id)
        session.commit()
    if resends:
        log.warning("reconciler: sending again ingest %s, plan %s, batches %s, assembly %s",
                    resends.ingest, resends.plan, resends.batches, resends.assemble)
    return resends


def _stage_due(rt: Runtime, session, job: Job, now: datetime) -> bool:  # type: ignore[no-untyped-def]
    """Whether the job's stage needs its message again (marked as sent when it does)."""
    if job.runner and not holder_gone(job.runner, job.heartbeat_at, rt.settings.lease_seconds):
        return False  # held: its worker is on it
    since = _backoff_start(rt, now, 0 if job.runner else job.sends)  # a gone holder: no back-off
    if job.runner:
        repo.release_job_stage(session, job.id, job.runner)
    return repo.mark_job_sent(session, job.id, unless_since=since)


def grace_seconds(rt: Runtime) -> float:
    """How long a commit's message may be missing before it is sent again."""
    return min(GRACE_SECONDS, rt.settings.lease_seconds / 4)


def _backoff_start(rt: Runtime, now: datetime, sends: int) -> datetime:
    backoff = min(grace_seconds(rt) * 2 ** min(sends, 10), MAX_BACKOFF_SECONDS)
    return now - timedelta(seconds=backoff)


def _wake_an_idle_queue(session, now: datetime, already: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    """One message for the next queued batch when nothing runs and no batch message went out for
    a while (a lost message would otherwise leave the queue to Redis's visibility timeout)."""
    if already or repo.running_batch_count(session):
        return []
    last = repo.last_batch_send(session)
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=now.tzinfo)
    if last is not None and now - last < timedelta(seconds=IDLE_QUEUE_SECONDS):
        return []
    batch_id = repo.next_queued_batch(session, suspects=True)
    if batch_id is None:
        return []
    repo.mark_batches_sent(session, [batch_id], now)
    return [batch_id]

"""Plan: cut every unplanned sentence of the active jobs into batches, for the workers there are.

The planner itself is ``pipeline/batching.py`` (sorted globally by length, memory-capped); this
module gives it what the database knows: the pending sentences, their jobs' priorities, and the
synthesis workers — each one's memory cap, calibrated memory model, and the batch size at which it
ran out of memory (``record_learned_rows``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from jobs.runtime import Runtime
from jobs.settings import Settings
from pipeline.batching import MemoryModel, PlanLimits, in_waves, plan_batches
from pipeline.scheduling import SchedulingPolicy
from pipeline.types import PlannedSentence
from storage import repo
from storage.models import Worker, utcnow

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

WORKER_ALIVE_SECONDS = 3600  # a synthesis worker not seen for this long no longer shapes batches


def plan_pending(rt: Runtime, job_ids: Sequence[int] | None = None) -> list[int]:
    """Cut every unplanned sentence of active jobs into batches (sorted globally by length).

    Each book in the policy's waves of whole
    chapters in reading order, each of about the same length, planned one after the other (each
    sorted by length; a stream takes them in that order), so that its first chapters are all
    spoken, and can be assembled, while the rest of it is (``jobs/assemble_ahead.py``).

    With nothing to plan (a plan message after the ingest task planned its book itself) it returns
    after one read, without queueing for SQLite's write lock behind other books' writes."""
    with rt.read_session() as session:
        if not repo.has_unplanned_sentences(session, job_ids):
            return []
    with rt.session() as session:
        sentences = repo.unplanned_sentences(session, job_ids)
        if not sentences:
            session.commit()
            return []
        priorities = repo.job_priorities(session, {s.job_id for s in sentences})
        planned = [PlannedSentence(id=s.id, max_new_tokens=s.max_new_tokens,
                                   prompt_tokens=estimated_prompt_tokens(s.text),
                                   priority=priorities.get(s.job_id, 0))
                   for s in sentences]
        limits, memory = plan_limits(rt.settings, live_synthesis_workers(session))
        # another book still being read will add batches behind these: they are not the queue's end
        ends_queue = repo.jobs_being_read(session) == 0
        stretches = in_waves(sentences, planned, limits.policy.waves())
        planned_at, batches = utcnow(), []
        for number, (stretch, opens_book) in enumerate(stretches):
            # each wave a plan of its own, made in order (a stream takes plans in creation order)
            limits = replace(limits, ends_queue=ends_queue and number == len(stretches) - 1,
                             lead_rows=limits.policy.lead_rows if opens_book else 0)
            batches += repo.create_batches(session, plan_batches(stretch, limits, memory),
                                           planned_at=planned_at + timedelta(milliseconds=number))
        session.commit()
        ids = [b.id for b in batches]
        log.info("planned %d sentences into %d batches%s", len(planned), len(ids),
                 f" in {len(stretches)} waves of chapters" if len(stretches) > 1 else "")
        return ids


def estimated_prompt_tokens(text: str) -> int:
    # One token per character plus upstream's control tokens ([Stts][spk_emb][speed_5]...[Ptts]).
    return len(text) + 8


def live_synthesis_workers(session: Session) -> list[Worker]:
    return repo.live_workers(session, utcnow() - timedelta(seconds=WORKER_ALIVE_SECONDS))


def plan_limits(settings: Settings, workers: Sequence[Worker] = ()) -> tuple[PlanLimits, MemoryModel]:
    """Batch limits for the smallest live synthesis worker — the scheduling policy sized from its
    memory cap and the batch size at which it last ran out of memory — its calibrated memory
    model, and how many workers share the batches.

    With no worker registered yet (the first book of a fresh cluster) no card is assumed: batches
    are cut by rows alone, and the worker that takes one halves it if it does not fit (and records
    the size that did, for every later plan)."""
    capped = [w for w in workers if w.memory_cap_bytes]
    smallest = min(capped, key=lambda w: w.memory_cap_bytes) if capped else None
    policy = scheduling_policy(settings, any(w.device.startswith("cuda") for w in workers),
                               smallest.memory_cap_bytes if smallest else None)
    learned = [w.max_rows for w in workers if w.max_rows]
    policy = policy.with_learned_rows(min(learned) if learned else None)
    memory = (MemoryModel(fixed_bytes=smallest.fixed_bytes,
                          bytes_per_row_position=smallest.bytes_per_row_position)
              if smallest else MemoryModel())
    return PlanLimits.of(policy, workers=max(1, len(workers))), memory


def scheduling_policy(settings: Settings, gpu_worker: bool = False,
                      memory_cap_bytes: int | None = None) -> SchedulingPolicy:
    """The policy for this deployment: on a GPU when this process or a worker runs on one;
    TTS_JOBS_MAX_BATCH overrides the device's batch size, TTS_JOBS_WAVES its waves a book."""
    gpu = settings.device.startswith("cuda") or gpu_worker
    policy = SchedulingPolicy.for_device(gpu, memory_cap_bytes, settings.max_batch)
    return replace(policy, waves_per_book=settings.waves) if settings.waves else policy


def register_synthesis_worker(rt: Runtime, engine: Engine, name: str, device_memory: int | None) -> None:
    """Announce a synthesis worker's device, precision, memory cap and calibration to the planner."""
    memory = engine.memory_model()
    cap = int(device_memory * rt.settings.memory_fraction) if device_memory else None
    with rt.session() as session:
        repo.register_worker(session, name, device=engine.device, precision=engine.precision,
                             model_dir=str(engine.model_root), memory_cap_bytes=cap,
                             fixed_bytes=memory.fixed_bytes,
                             bytes_per_row_position=memory.bytes_per_row_position, max_rows=None)
        session.commit()


def record_learned_rows(rt: Runtime, worker: str, rows: int) -> None:
    """Remember, for the planner, the batch size ``worker`` had to halve to after running out of
    memory: later batches are planned no larger."""
    with rt.session() as session:
        repo.lower_worker_max_rows(session, worker, rows)
        session.commit()
    log.warning("worker %s: out of memory; batches capped at %d rows from now on", worker, rows)


def device_memory_bytes(engine: Engine) -> int | None:
    """The GPU memory the engine may use: its cap (TTS_JOBS_MEMORY_GIB) or the whole card; None on CPU."""
    return engine.memory_budget_bytes()

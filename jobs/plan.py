"""Plan: cut every unplanned sentence of the active jobs into batches, for the workers there are.

The planner itself is ``pipeline/batching.py`` (sorted globally by length, memory-capped); this
module gives it what the database knows: the pending sentences, their jobs' priorities, and the
synthesis workers — each one's memory cap, calibrated memory model, and the batch size at which it
ran out of memory (``record_learned_rows``).
"""

from __future__ import annotations

import logging
import threading
import time
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
from storage.models import BatchState, Worker, utcnow

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

WORKER_ALIVE_SECONDS = 3600  # a synthesis worker not seen for this long no longer shapes batches
# How long the plan of a book's rest waits for the run to claim its first batch (``main``): more
# than a warm engine's load and warm-up; a run that is slower to start gets the rest planned anyway.
FIRST_CLAIM_WAIT_SECONDS = 10.0


def plan_pending(rt: Runtime, job_ids: Sequence[int] | None = None, opening: bool = False) -> list[int]:
    """Cut every unplanned sentence of active jobs into batches (sorted globally by length).

    Each book in the policy's waves of whole chapters in reading order, each of about the same
    length, planned one after the other (each sorted by length; a stream takes them in that
    order), so that its first chapters are all spoken, and can be assembled, while the rest of it
    is (``jobs/assemble_ahead.py``). ``opening``: a long book's first waves only
    (``SchedulingPolicy.opening_waves``), for a run that speaks them while the rest is planned
    beside it (``PlanBeside``); a book planned in part gets the rest in waves of the same length.

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
        limits, memory = plan_limits(rt.settings, live_synthesis_workers(session))
        policy = limits.policy
        first = policy.opening_waves if opening and len(sentences) > policy.plan_beside_from else None
        # any book's last wave may end the queue: books submitted together are spoken largest
        # first, not in the order they are read (so its last batches are cut for several workers)
        ends_queue = first is None
        stretches = in_waves(sentences, policy.waves(), repo.shares_left_to_plan(session, priorities), first)
        planned_at, batches = utcnow(), []
        places = repo.book_places(session, priorities, planned_at)
        for number, (stretch, opens_book) in enumerate(stretches):
            # each wave a plan of its own, made in order (a stream takes plans in creation order)
            limits = replace(limits, ends_queue=ends_queue and ends_its_book(stretches, number),
                             lead_rows=policy.lead_rows if opens_book else 0)
            planned = [PlannedSentence(id=s.id, max_new_tokens=s.max_new_tokens,
                                       prompt_tokens=estimated_prompt_tokens(s.text),
                                       priority=priorities.get(s.job_id, 0)) for s in stretch]
            batches += repo.create_batches(session, plan_batches(planned, limits, memory),
                                           planned_at=planned_at + timedelta(milliseconds=number),
                                           place=stretch_place(places, {s.job_id for s in stretch}))
        session.commit()
        ids = [b.id for b in batches]
        log.info("planned %d sentences into %d batches%s", sum(len(s) for s, _ in stretches), len(ids),
                 f" in {len(stretches)} waves of chapters" if len(stretches) > 1 else "")
        return ids


def ends_its_book(stretches: list[tuple[list, bool]], number: int) -> bool:
    """Whether stretch ``number`` is its book's last (``in_waves`` gives them book after book)."""
    return number == len(stretches) - 1 or stretches[number + 1][0][0].job_id != stretches[number][0][0].job_id


def stretch_place(places: dict[int, repo.BookPlace], job_ids: set[int]) -> repo.BookPlace:
    """Where a stretch's batches stand in the queue: its book's place (a stretch of several
    books, as a plan of one wave makes, moves with the earliest submitted and the largest)."""
    mine = [places[job_id] for job_id in job_ids]
    return repo.BookPlace(min(p.submitted_at for p in mine), max(p.steps for p in mine))


class PlanBeside:
    """The rest of a run's book planned in a child process (``child_process.py``) while the
    run speaks its first waves (``plan_pending``'s ``opening``): the whole plan of 181,000
    sentences took 6.2 s before the first sentence, its first two waves 1.9 s (the build
    machine), and in the run's own process the rest would hold the interpreter lock that the
    threads feeding the GPU wait on. Nothing is started when nothing is left to plan. If the
    child fails, ``wait`` plans the rest itself."""

    def __init__(self, rt: Runtime, job_id: int) -> None:
        from jobs.child_process import Child

        self.rt, self.job_id, self._lock = rt, job_id, threading.Lock()
        with rt.read_session() as session:
            left = repo.has_unplanned_sentences(session, [job_id])
        self._child: Child | None = Child(rt.settings, __name__, f"main({job_id:d})") if left else None

    def wait(self) -> bool:
        """Once the rest is planned: whether batches may have been added since the last call
        (a stream that found its queue empty looks again)."""
        with self._lock:
            child, self._child = self._child, None
            if child is None:
                return False
            code = child.wait()
            if code != 0:
                log.warning("job=%s: planning the rest of the book beside the speaking failed (exit status "
                            "%s: %s); planning it here", self.job_id, code, child.last_words or "no message")
                plan_pending(self.rt, [self.job_id])
            return True

    def stop(self) -> None:
        """End the child if it still runs (the run stopped): what it left unplanned a resumed run plans."""
        with self._lock:
            if self._child is not None:
                self._child.process.terminate()
                self._child.wait()
                self._child = None


def main(job_id: int) -> None:
    """The child of ``PlanBeside``: plan what is left of job ``job_id``'s book, once the run has
    claimed its first batch (or a while has passed): SQLite has one writer at a time, and the
    plan's write (~0.2 s for a long book) must not hold the claim the first sentence waits for."""
    from jobs.child_process import child_runtime

    rt = child_runtime()
    deadline = time.monotonic() + FIRST_CLAIM_WAIT_SECONDS
    while time.monotonic() < deadline:
        with rt.read_session() as session:
            if repo.job_batches(session, job_id, (BatchState.RUNNING, BatchState.DONE)):
                break
        time.sleep(0.05)  # each look joins the book's sentences: a few ms for a long book
    plan_pending(rt, [job_id])


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

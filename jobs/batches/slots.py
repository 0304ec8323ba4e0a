"""A synthesis worker's decode slots sized for a whole job before its stream starts
(jobs/batches/stream.py), so that the stream keeps the job's widest batch in flight throughout."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobs.plan import estimated_prompt_tokens
from jobs.runtime import Runtime
from storage import repo

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)


def prepare_slots_for_job(rt: Runtime, engine: Engine, job_id: int) -> None:
    """On a GPU with no memory cap: decode slots (and their CUDA graphs) for the job's widest
    batch at its longest sentence, so that its stream keeps that many rows in flight from the
    first batch to the last (else a stream's slots are its first batch's: in a book planned in
    waves of chapters, one wave's). Where they would crowd the device, as many of its rows as fit
    (``step_graphs.fitting_rows``: half of them or more); else nothing is prepared."""
    from pipeline.engine.step_graphs import fitting_rows, rounded_positions

    budget = engine.memory_budget_bytes()
    if budget is None or engine.memory_capped():
        return
    with rt.read_session() as session:
        rows, positions = repo.queued_batch_shape(session, job_id)
        steps = repo.longest_pending_sentence(session, job_id)
        # the later waves of a book planned in two goes (plan.PlanBeside) are not in batches yet
        if unplanned := repo.longest_unplanned_span(session, job_id):
            positions = max(positions, estimated_prompt_tokens("") + unplanned)
    # where the widest batch at the longest sentence would crowd the device, the most of its rows
    # that fit (an 80-GB card, a book of 2,000-position sentences: 640 of 1,024); not under half
    rows = fitting_rows(rows, rounded_positions(positions), engine.kv_bytes_per_position(), budget)
    if not rows:
        return
    # Only the full slots' step is captured now: it is all the stream runs until its last rows,
    # and the first sentence waits for these captures (the ten fewer-row steps took ~0.5 s of
    # the 0.6 s from the speaking's start to the slots on an H200). They are captured when first
    # run, at the stream's end, where each costs what it does here (~50 ms).
    graphs = engine.prepare_slots(rows, max(positions - steps, 0), steps, every_row_count=False)
    engine.slots = rows
    log.info("job=%s: decode slots for %d sentences of up to %d positions (%d CUDA graphs; steps of "
             "fewer rows when first run)", job_id, rows, positions, graphs)

"""What happens when a batch finishes: its sentences' audio recorded, the batch closed, and the
jobs whose every sentence is now spoken moved on to assembly — or, when it failed, the batch
given back to the queue (or failed for good after ``max_attempts``).

Every sentence's WAV is written (atomically) before anything here records it, and results are
kept only while this worker still holds the batch's lease: a crash loses at most the batch in
flight, and a duplicate delivery never records twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.orm import Session

from jobs.batches.cleanup import remove_audio, unrecorded_audio
from jobs.batches.work import SentenceOutcome
from jobs.lifecycle import fail_job_in
from jobs.runtime import Runtime
from pipeline.types import SynthesisResult
from storage import repo
from storage.models import BatchState, JobState, Sentence, SentenceState

log = logging.getLogger(__name__)


def record_batch_results(rt: Runtime, batch_id: int, worker: str,
                         outcomes: Sequence[SentenceOutcome]) -> list[int]:
    """Record a spoken batch and close it. Returns the jobs now ready to assemble."""
    with rt.session() as session:
        if not repo.holds_lease(session, batch_id, worker):
            session.commit()
            log.warning("batch=%s: lease lost to another worker; its result is kept instead", batch_id)
            return []
        states = repo.sentence_states(session, [o.work.sentence_id for o in outcomes])
        still_open = [o for o in outcomes
                      if states.get(o.work.sentence_id, SentenceState.DONE.value) != SentenceState.DONE.value]
        repo.record_spoken_sentences(session, [
            repo.SpokenSentence(o.work.sentence_id, o.audio_path, o.seconds, o.gpt_steps, o.hit_limit)
            for o in still_open if o.spoken])
        for o in still_open:
            if not o.spoken:
                _fail_sentence(session, o)
        session.commit()
    return finish_batch(rt, batch_id)


def finish_batch(rt: Runtime, batch_id: int) -> list[int]:
    """Close a batch with nothing left to speak. Returns the jobs now ready to assemble."""
    with rt.session() as session:
        repo.finish_batch(session, batch_id, BatchState.DONE)
        ready = [j for j in repo.batch_job_ids(session, batch_id) if _start_assembly_if_complete(session, j)]
        session.commit()
    return ready


def give_back_or_fail(rt: Runtime, batch_id: int, worker: str, attempts: int, exc: Exception) -> None:
    """A batch that failed goes back to the queue; after ``max_attempts`` it fails its jobs. The
    WAVs it wrote and did not record go (a full disk keeps nothing it cannot use)."""
    reason = f"{type(exc).__name__}: {exc}"
    written = unrecorded_audio(rt, batch_id)
    with rt.session() as session:
        held = repo.holds_lease(session, batch_id, worker)
        if held and attempts >= rt.settings.max_attempts:
            fail_batch_for_good(session, batch_id, f"synthesis failed {attempts} times: {reason}")
        elif held:
            repo.release_batch(session, batch_id, worker, reason)
        session.commit()
    if held:  # else another worker took it over and writes those files now
        remove_audio(written)


def fail_batch_for_good(session: Session, batch_id: int, reason: str) -> None:
    """Give up on a batch: it and every job with sentences in it fail with ``reason``."""
    repo.finish_batch(session, batch_id, BatchState.FAILED, error=reason)
    for job_id in repo.batch_job_ids(session, batch_id):
        fail_job_in(session, job_id, reason)


def log_batch_done(batch_id: int, outcomes: Sequence[SentenceOutcome], synthesized_s: float,
                   written_s: float, recorded_s: float) -> None:
    seconds = sum(o.seconds for o in outcomes)
    log.info("batch=%s: %d sentences, %.0f s of audio: synthesized in %.2f s (%.0fx real time), "
             "written in %.2f s, recorded in %.2f s", batch_id, len(outcomes), seconds, synthesized_s,
             seconds / max(synthesized_s, 1e-9), written_s, recorded_s)


def _fail_sentence(session: Session, outcome: SentenceOutcome) -> None:
    work = outcome.work
    repo.fail_sentence(session, session.get(Sentence, work.sentence_id), outcome.error or "no audio")
    fail_job_in(session, work.job_id, f"chapter {work.chapter_index + 1}, sentence {work.index + 1}: "
                f"{outcome.error}")


def _start_assembly_if_complete(session: Session, job_id: int) -> bool:
    progress = repo.job_progress(session, [job_id])[job_id]
    if progress.total == 0 or progress.done < progress.total:
        return False
    return repo.move_job(session, job_id, JobState.ASSEMBLING, only_from=[JobState.SYNTHESIZING])


def without_waveform(result: SynthesisResult) -> SynthesisResult:
    """The result as recorded (steps, limit): its waveform is in the WAV and must not pile up."""
    from dataclasses import replace

    import numpy as np

    return replace(result, waveform=np.zeros(0, np.float32))

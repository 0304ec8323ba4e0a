"""Speak one batch on its own: claim it, synthesize it within the device's memory, write every
sentence's WAV, record it.

This is the road of a worker with streaming off and of a batch whose jobs asked for the refine
pass (or whose last holder died); a GPU worker and the embedded `run` otherwise speak their
batches as one stream (``batch_stream.py``), built from the same steps. Out of memory is handled by
``pipeline/engine/oom.py`` alike on both roads; what it learns is recorded for the planner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobs.batches.claim import claim_batch
from jobs.batches.record import give_back_or_fail, log_batch_done, record_batch_results
from jobs.batches.work import ClaimedBatch, SentenceOutcome, SentenceWork, log_requests
from jobs.choices.voices import with_voice
from jobs.leases import LeaseKeeper
from jobs.plan import record_learned_rows
from jobs.runtime import Runtime
from pipeline.types import SynthesisResult

if TYPE_CHECKING:
    from pipeline.audio import SentenceWavWriter
    from pipeline.engine import Engine
    from pipeline.engine.oom import MemoryFit, Outcome

log = logging.getLogger(__name__)


def synthesize_batch(rt: Runtime, engine: Engine, batch_id: int, worker: str,
                     learned_by: str | None = None) -> list[int]:
    """Speak one batch and record every sentence's audio. Returns the jobs now ready to assemble.

    ``worker`` names the lease holder (host:pid); ``learned_by`` the device's worker, under which
    an out-of-memory limit is recorded for the planner (None: not recorded)."""
    claimed, ready = claim_batch(rt, batch_id, worker, take_over_dead=True)
    if claimed is None:
        return ready
    return speak_claimed_batch(rt, engine, claimed, worker, learned_by)


def speak_claimed_batch(rt: Runtime, engine: Engine, claimed: ClaimedBatch, worker: str,
                        learned_by: str | None = None) -> list[int]:
    """Speak a claimed batch on its own and record it; returns the jobs ready to assemble."""
    batch_id = claimed.batch_id
    began = time.monotonic()
    with LeaseKeeper(rt, {batch_id}, worker):
        try:
            outcomes, synthesized_s = _speak_and_write(rt, engine, claimed, learned_by)
        except Exception as exc:  # device error, full disk...: give the batch back, or fail it for good
            give_back_or_fail(rt, batch_id, worker, claimed.attempts, exc)
            raise
    written = time.monotonic()
    ready = record_batch_results(rt, batch_id, worker, outcomes)
    log_batch_done(batch_id, outcomes, synthesized_s, written - began - synthesized_s, time.monotonic() - written)
    return ready


def _speak_and_write(rt: Runtime, engine: Engine, claimed: ClaimedBatch, learned_by: str | None
                     ) -> tuple[list[SentenceOutcome], float]:
    """The batch's outcomes with every sentence's WAV written, and the seconds synthesis took. Each
    WAV is written as soon as its waveform is on the host, while the GPU goes on with the rest of
    the batch (written after synthesis, they idled an H200 ~0.5 s per batch)."""
    from pipeline.audio import SentenceWavWriter
    from pipeline.engine.oom import synthesize_fitting

    began = time.monotonic()
    work = refined(engine, claimed.work)
    log_requests(claimed.batch_id, work)
    with SentenceWavWriter() as writer:
        outcomes, fit = synthesize_fitting(
            engine, [with_voice(engine, w.request) for w in work],
            on_waveform=lambda index, wave: write_sentence(rt, writer, work[index], wave))
        synthesized_s = time.monotonic() - began
        learn_from(rt, fit, learned_by)
        return written_outcomes(rt, writer, work, outcomes), synthesized_s


def refined(engine: Engine, work: list[SentenceWork]) -> list[SentenceWork]:
    """Run upstream's text-refinement pass, batched per style, for the sentences of jobs that
    asked for it (each job's style levels in the pass's prompt)."""
    styles: dict[str, list[SentenceWork]] = {}
    for w in work:
        if w.refine_prompt is not None:
            styles.setdefault(w.refine_prompt, []).append(w)
    if not styles:
        return work
    from pipeline.engine.refine import RefineParams

    texts: dict[int, str] = {}
    for prompt, chosen in styles.items():
        refined_texts = engine.refine_texts([w.request.text for w in chosen], RefineParams(prompt=prompt))
        texts.update(zip((w.sentence_id for w in chosen), refined_texts))
    return [replace(w, request=replace(w.request, text=texts[w.sentence_id])) if w.refine else w
            for w in work]


def learn_from(rt: Runtime, fit: MemoryFit, worker: str | None) -> None:
    """Tell the planner the batch size this device ran at after running out of memory."""
    if worker is not None and fit.learned_rows is not None:
        record_learned_rows(rt, worker, fit.learned_rows)


def write_sentence(rt: Runtime, writer: SentenceWavWriter, work: SentenceWork, waveform: Any) -> str:
    """Hand one sentence's WAV to the writer (once per sentence); returns its relative path."""
    relative = rt.artifacts.sentence_audio(work.job_id, work.chapter_index, work.index)
    # root / relative, not resolve(): this runs on the thread that launches Decoder + Vocos, where
    # host time can idle the GPU, and resolve() lstat()s every folder of the path (~60 us, ten
    # times the join). The name is made of numbers: it cannot leave the data directory.
    writer.write(work.sentence_id, rt.artifacts.root / relative, waveform)
    return str(relative)


def outcome(work: SentenceWork, result: Outcome, audio_path: str | None, seconds: float) -> SentenceOutcome:
    """A sentence's outcome from the engine's result (or error) and where its WAV was written."""
    if not isinstance(result, SynthesisResult):
        return SentenceOutcome(work, error=str(result))
    return SentenceOutcome(work, audio_path=audio_path, seconds=seconds, gpt_steps=result.gpt_steps,
                           hit_limit=result.hit_limit)


def written_outcomes(rt: Runtime, writer: SentenceWavWriter, work: Sequence[SentenceWork],
                     results: Sequence[Outcome]) -> list[SentenceOutcome]:
    """Every sentence WAV of the batch written (atomic and durable each; most were handed in
    during synthesis) before anything is recorded."""
    paths = {w.sentence_id: write_sentence(rt, writer, w, r.waveform)
             for w, r in zip(work, results, strict=True) if isinstance(r, SynthesisResult)}
    seconds = writer.seconds()
    return [outcome(w, r, paths.get(w.sentence_id), seconds.get(w.sentence_id, 0.0))
            for w, r in zip(work, results, strict=True)]


def log_device_time(what: str, speaker: Engine) -> None:
    """Where ``what``'s device time went since the engine's clock was reset (CUDA events;
    host-timed on CPU): beside the "synthesized in" lines this tells a slow GPU from a GPU kept
    waiting."""
    seconds, edges = speaker.clock.totals(), speaker.clock.edges()
    if not speaker.clock.steps and not any(seconds.values()):
        return  # a worker's task whose batch a stream spoke already: three lines of zeros said nothing
    # the steps and prefills share one stream: the rest of the busy time is Decoder+Vocos alone
    alone = max(0.0, edges["busy_end"] - edges["idle_start"] - edges["idle_between"]
                - seconds["prefill"] - seconds["gpt_steps"])
    log.info("%s: device time: prefill %.2f s, %d decode steps "
             "%.2f s, Decoder+Vocos %.2f s (%.2f s after the last step); idle %.2f s before the first and "
             "%.2f s between; Decoder+Vocos alone %.2f s of %.2f s",
             what, seconds["prefill"], speaker.clock.steps, seconds["gpt_steps"], seconds["waveform"],
             edges["tail"], edges["idle_start"], edges["idle_between"], alone, edges["busy_end"])
    captures = speaker.graph_captures()
    log.info("%s: CUDA graphs captured since the engine loaded (count, host seconds of first runs and "
             "captures): %s", what, "; ".join(f"{kind} {count}, {seconds:.2f} s"
                                             for kind, (count, seconds) in captures.items()))
    calls = speaker.clock.driver_calls()
    if calls:
        log.info("%s: allocator calls to the driver meanwhile: cudaMalloc %d, cudaFree %d, "
                 "retries %d, pinned host blocks made %d, freed %d", what, calls["num_device_alloc"],
                 calls["num_device_free"], calls["num_alloc_retries"], calls["num_host_alloc"],
                 calls["num_host_free"])

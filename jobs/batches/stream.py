"""A synthesis worker's batches as one stream through its decode slots.

The task for batch N claims N and starts the engine's stream (pipeline/engine/streaming.py).
While N's sentences are in the slots, the next queued batch is claimed and its sentences take the
slots as they come free: the slots never drain between batches (its own Celery message, coming
later, finds it leased or done). Each batch is recorded, and its finished jobs sent to assembly,
once its last WAV is written, on a recorder thread: the stream goes on meanwhile.

- A stream claims batches for at most ``Settings.stream_seconds`` (a warm shutdown waits for the
  running task); a batch whose jobs asked for the refine pass (a generation loop of its own on
  the same model) is left to its own message: the stream ends before it.
- Each sentence's WAV, once written, is measured for assembly (speech bounds, loudness, peaks) by
  helper processes (``Settings.measure_helpers``; pipeline/audio/measure.py) as the stream goes
  on. The queue's last batches (``SchedulingPolicy.queue_is_deep``) are recorded only once
  measured, so a book's last batch leaves assembly nothing to measure (what is not measured in
  time, assembly measures itself).
- Out of memory (slots larger than the device now has free) is ``pipeline/engine/oom.py``'s: the
  stream takes no more batches and speaks those it took with halving; the planner learns the fit.
- If the stream fails otherwise, every batch it holds and has not recorded goes back to the queue
  (or fails for good after ``max_attempts``), and each but the task's own is sent out again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs import faults
from jobs.batches.claim import claim_batch
from jobs.batches.record import give_back_or_fail, log_batch_done, record_batch_results, without_waveform
from jobs.batches.slots import prepare_slots_for_job
from jobs.batches.speak import learn_from, outcome, speak_claimed_batch, write_sentence
from jobs.batches.work import ClaimedBatch, SentenceWork, log_requests
from jobs.choices.voices import with_voice
from jobs.leases import LeaseKeeper
from jobs.plan import scheduling_policy
from jobs.runtime import Runtime
from jobs.settings import process_environment
from pipeline.types import SynthesisResult
from storage import repo

if TYPE_CHECKING:
    from pipeline.audio.measure import MeasureAhead
    from pipeline.engine import Engine
    from pipeline.engine.oom import Outcome
    from pipeline.types import SynthesisRequest

log = logging.getLogger(__name__)

# How long recording one of the queue's last batches waits for its measures (~0.1 s): then assembly measures
MEASURE_WAIT_SECONDS = 10.0

JobsReady = Callable[[list[int]], None]  # jobs whose every sentence is spoken: assemble them
BatchReturned = Callable[[int], None]  # a batch given back to the queue: send its message again
BatchRecorded = Callable[[int], None]  # a batch recorded (its id): its books' chapters may be assembled ahead


@dataclass(frozen=True)
class StreamScope:
    """Which queued batches a stream takes, for how long, who hears of each one recorded: a worker's,
    any for ``Settings.stream_seconds``; an embedded run's, its job's until none is left or planned."""

    seconds: float | None
    job_id: int | None = None
    on_recorded: BatchRecorded | None = None
    more_planned: Callable[[], bool] | None = None  # waits for a plan under way: whether it added any


def synthesize_stream(rt: Runtime, engine: Engine, batch_id: int, worker: str, jobs_ready: JobsReady,
                      batch_returned: BatchReturned, learned_by: str | None = None,
                      batch_recorded: BatchRecorded | None = None) -> None:
    """Speak batch ``batch_id`` and the queued batches after it as one stream (see the module).
    ``learned_by`` names the device's worker for an out-of-memory limit (None: not recorded)."""
    claimed, ready = _claim_first(rt, batch_id, worker)
    jobs_ready(ready)
    if claimed is not None:
        faults.pause("synthesize")  # the reliability tests' hold on a running batch
        scope = StreamScope(seconds=rt.settings.stream_seconds, on_recorded=batch_recorded)
        _speak(rt, engine, claimed, worker, jobs_ready, batch_returned, learned_by, scope)


def speak_job(rt: Runtime, engine: Engine, job_id: int, worker: str, learned_by: str | None = None,
              on_recorded: BatchRecorded | None = None,
              more_planned: Callable[[], bool] | None = None) -> None:
    """Every queued batch of job ``job_id`` through the decode slots as one stream, in this process
    (the embedded run), slots full from batch to batch, each recorded once its last WAV is written
    (``on_recorded`` hears it); a batch that needs the refine pass, or whose last holder died, runs
    on its own. An empty queue waits for the plan of the book's rest (``more_planned``) first."""
    scope = StreamScope(seconds=None, job_id=job_id, on_recorded=on_recorded, more_planned=more_planned)
    prepare_slots_for_job(rt, engine, job_id)
    tried: set[int] = set()
    while True:
        with rt.read_session() as session:
            batch_id = repo.next_queued_batch(session, suspects=True, job_id=job_id)
        if batch_id is None and more_planned is not None and more_planned():
            continue
        if batch_id is None or batch_id in tried:  # a batch that cannot be claimed is left queued
            return
        tried.add(batch_id)
        claimed, _ = claim_batch(rt, batch_id, worker, take_over_dead=True)
        if claimed is not None:
            _speak(rt, engine, claimed, worker, _unheard, _unheard, learned_by, scope)


def _speak(rt: Runtime, engine: Engine, claimed: ClaimedBatch, worker: str, jobs_ready: JobsReady,
           batch_returned: BatchReturned, learned_by: str | None, scope: StreamScope) -> None:
    if claimed.refines or claimed.suspect:
        jobs_ready(speak_claimed_batch(rt, engine, claimed, worker, learned_by))
        if scope.on_recorded is not None:
            scope.on_recorded(claimed.batch_id)
        return
    _Stream(rt, engine, claimed, worker, jobs_ready, batch_returned, learned_by, scope).run()


def _unheard(_: object) -> None:
    pass


def _claim_first(rt: Runtime, batch_id: int, worker: str) -> tuple[ClaimedBatch | None, list[int]]:
    """The stream's first batch: the queue's first in its order (the database decides what runs next:
    a batch given back by a killed worker keeps its place), else the message's own (taken over from a
    dead holder on this host if need be); what an earlier attempt here still holds goes back first."""
    with rt.session() as session:
        if returned := repo.give_back_own_batches(session, worker):
            log.info("batches %s: held by this process's earlier attempt; back in the queue", returned)
        session.commit()
    with rt.read_session() as session:
        first, ready_first = repo.next_queued_batch(session, suspects=True), []
    if first is not None and first != batch_id:
        claimed, ready_first = claim_batch(rt, first, worker)
        if claimed is not None:
            return claimed, ready_first
    claimed, ready = claim_batch(rt, batch_id, worker, take_over_dead=True)
    return claimed, ready_first + ready


@dataclass
class _InFlight:
    """A claimed batch of the stream, until it is recorded."""

    claimed: ClaimedBatch
    began: float
    spoken: dict[int, tuple[SentenceWork, Outcome, str | None]] = field(default_factory=dict)  # by sentence id

    @property
    def complete(self) -> bool:
        return len(self.spoken) == len(self.claimed.work)


class _Stream:
    """One task's stream: the batches it has claimed, each held (lease renewed) until recorded.

    Three threads meet here: the engine's loop (which calls ``_more`` on its fetch thread), its
    waveform thread (``_on_result``) and the recorder (``_record``); ``lock`` guards what they share."""

    def __init__(self, rt: Runtime, engine: Engine, first: ClaimedBatch, worker: str,
                 jobs_ready: JobsReady, batch_returned: BatchReturned, learned_by: str | None,
                 scope: StreamScope) -> None:
        from pipeline.audio import SentenceWavWriter

        self.rt, self.engine, self.first, self.worker = rt, engine, first, worker
        self.jobs_ready, self.batch_returned, self.learned_by, self.scope = jobs_ready, batch_returned, learned_by, scope
        self.deadline = time.monotonic() + (scope.seconds if scope.seconds is not None else float("inf"))
        self.queue_deep = False  # as the last claim saw the queue (read on the engine's loop thread)
        self.policy = scheduling_policy(rt.settings, gpu_worker=True)
        self.sentences: list[tuple[int, SentenceWork]] = []  # stream index -> (batch, sentence)
        self.in_flight: dict[int, _InFlight] = {}
        self.lock = threading.Lock()
        self.leases = LeaseKeeper(rt, {first.batch_id}, worker)
        self.measurer = measure_ahead(rt)
        self.writer = SentenceWavWriter(on_written=self.measurer.add)  # measured as they are written
        self.recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="record-batch")
        self.recording: list[Future[None]] = []

    def run(self) -> None:
        from pipeline.engine.oom import stream_fitting

        try:
            with self.writer, self.leases:
                try:
                    fit = stream_fitting(self.engine, self._admit(self.first), self._more, self._on_result,
                                         fetch_early=lambda: self.queue_deep)
                    learn_from(self.rt, fit, self.learned_by)
                    self._wait_for_recording()
                finally:
                    # On failure too, what is being recorded is kept: the recorder ends before
                    # the writer (its records make their WAVs durable through it) and the leases.
                    self.recorder.shutdown(wait=True)
        except Exception as exc:
            self._give_back_unrecorded(exc)
            raise

    # ------------------------------------------------------------------- claiming
    def _admit(self, claimed: ClaimedBatch) -> list[SynthesisRequest]:
        with self.lock:
            self.in_flight[claimed.batch_id] = _InFlight(claimed, time.monotonic())
            self.sentences += [(claimed.batch_id, w) for w in claimed.work]
        self.leases.add(claimed.batch_id)
        log_requests(claimed.batch_id, claimed.work)
        return [with_voice(self.engine, w.request) for w in claimed.work]

    def _more(self) -> list[SynthesisRequest] | None:
        """The next queued batch, claimed (on the engine's fetch thread); None ends the stream,
        as does a batch that could not be recorded (a full disk would fail every batch after it)."""
        while time.monotonic() < self.deadline and not self._recording_failed():
            with self.rt.read_session() as session:
                batch_id = repo.next_queued_batch(session, job_id=self.scope.job_id, policy=self.policy)
                refines = batch_id is not None and repo.batch_needs_refine(session, batch_id)
                # many left for the other workers: the next one may be claimed as soon as a slot is free
                self.queue_deep = self.policy.queue_is_deep(
                    repo.queued_batch_count(session, self.scope.job_id))
            if batch_id is None and self.scope.more_planned is not None and self.scope.more_planned():
                continue
            if batch_id is None or refines:
                return None
            claimed, ready = claim_batch(self.rt, batch_id, self.worker)
            self.jobs_ready(ready)
            if claimed is not None:  # else another worker took it first, or nothing was left in it
                return self._admit(claimed)
        return None

    # ------------------------------------------------------------------- results
    def _on_result(self, index: int, result: Outcome) -> None:
        """A sentence's waveform (on the engine's waveform thread), or why it has none: its WAV
        handed to the writer; the batch's last one sends the batch to the recorder."""
        batch_id, work = self.sentences[index]
        relative = None
        if isinstance(result, SynthesisResult):
            relative = write_sentence(self.rt, self.writer, work, result.waveform)
            result = without_waveform(result)
        with self.lock:
            flight = self.in_flight[batch_id]
            flight.spoken[work.sentence_id] = (work, result, relative)
            if flight.complete:
                self.recording.append(self.recorder.submit(self._record, flight, time.monotonic()))

    def _record(self, flight: _InFlight, synthesized_at: float) -> None:
        batch_id = flight.claimed.batch_id
        seconds = self.writer.take_seconds(list(flight.spoken))
        written_at, root = time.monotonic(), self.rt.artifacts.root
        measuring = self.measurer.settle([root / relative for _, _, relative in flight.spoken.values()
                                          if relative is not None])
        if not self.queue_deep:
            # The queue's last batches: recording one may finish a book, whose assembly then reads
            # these measures instead of measuring the sentences itself after the last batch.
            wait(measuring, timeout=MEASURE_WAIT_SECONDS)
        outcomes = [outcome(work, result, relative, seconds.get(work.sentence_id, 0.0))
                    for work, result, relative in (flight.spoken[w.sentence_id] for w in flight.claimed.work)]
        ready = record_batch_results(self.rt, batch_id, self.worker, outcomes)
        with self.lock:
            del self.in_flight[batch_id]
        self.leases.discard(batch_id)
        log_batch_done(batch_id, outcomes, synthesized_at - flight.began, written_at - synthesized_at,
                       time.monotonic() - written_at)
        self.jobs_ready(ready)
        if self.scope.on_recorded is not None:
            self.scope.on_recorded(batch_id)
        faults.pause("recorded")  # the progress tests' hold: a book's progress shown between batches

    def _recording_failed(self) -> bool:
        with self.lock:
            recording = list(self.recording)
        return any(r.done() and r.exception() is not None for r in recording)

    def _wait_for_recording(self) -> None:
        for recording in list(self.recording):
            recording.result()  # a write or record error is raised here

    def _give_back_unrecorded(self, exc: Exception) -> None:
        with self.lock:
            left = [flight.claimed for flight in self.in_flight.values()]
        for claimed in left:
            give_back_or_fail(self.rt, claimed.batch_id, self.worker, claimed.attempts, exc)
            if claimed.batch_id != self.first.batch_id:  # the task's own comes back with its retry
                self.batch_returned(claimed.batch_id)
        if left:
            log.warning("stream from batch=%s failed (%s: %s); gave back batches %s", self.first.batch_id,
                        type(exc).__name__, exc, [c.batch_id for c in left])


_measure_ahead: MeasureAhead | None = None
_measure_ahead_lock = threading.Lock()


def measure_ahead(rt: Runtime) -> MeasureAhead:
    """This worker process's sentence measurer (``rt.settings.measure_helpers`` helpers; made once)."""
    global _measure_ahead
    from pipeline.audio.measure import MeasureAhead
    from pipeline.audio.stitch_helpers import set_helper_environment

    with _measure_ahead_lock:
        if _measure_ahead is None:
            set_helper_environment(process_environment())
            _measure_ahead = MeasureAhead(rt.settings.measure_helper_count())
        return _measure_ahead

"""The embedded default: a whole job in this process (`tts-jobs run`), on the same stages the
workers run — submit, ingest, plan, speak every batch, assemble — one after the other.

An interrupted run is resumed, not redone: `run` of the same book (same content) with the same
options finds its unfinished job and continues it, and every sentence whose audio is recorded is
never spoken again (``--fresh`` starts over). Ctrl-C, SIGTERM and SIGHUP stop the run within a
batch: the batch in flight goes back to the queue, the job becomes ``interrupted``. A run that dies
without a word (SIGKILL, power loss) is recognised as interrupted by the next look
(``runners.recognise_interrupted``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.assemble import assemble_job
from jobs.assemble_ahead_child import AssembleAhead
from jobs.batches import cleanup
from jobs.batches.speak import log_device_time
from jobs.batches.stream import speak_job
from jobs.book_folders import default_out_root
from jobs.choices.options import JobOptions, recorded_options
from jobs.ingest import ingest_beside, ingest_job
from jobs.leases import this_process
from jobs.lifecycle import RETRYABLE_BY_RUN, fail_job, interrupt_job_in, retry_job
from jobs.plan import PlanBeside, device_memory_bytes, plan_pending, register_synthesis_worker
from jobs.run_claims import RunClaim, RunClaimed, claim_run
from jobs.runners import recognise_interrupted, run_heartbeat
from jobs.runtime import EngineLoading, Runtime
from jobs.status import OnStage, StageProgress, job_statuses, speaking_progress
from jobs.submit import Validated, check_options, submit_book, validate_book
from pipeline.errors import AssemblyError, NoSuchJob
from pipeline.files import file_sha256
from storage import repo
from storage.models import BatchState, Job, JobMode, JobState

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached `tts-jobs run` (Ctrl-C arrives as KeyboardInterrupt)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


STOPPED = (KeyboardInterrupt, Interrupted)


class RunStopped(BaseException):
    """An embedded run stopped by a signal: its job ``job_id`` is interrupted and resumable."""

    def __init__(self, job_id: int, by: str) -> None:
        super().__init__(f"job {job_id} stopped by {by}")
        self.job_id, self.by = job_id, by


@dataclass(frozen=True)
class RunPlan:
    """What `run` will do, decided before the model loads: resume ``resume_job`` or start anew."""

    book: Path
    options: JobOptions
    resume_job: int | None = None
    finished_job: int | None = None  # a done job made this audiobook with these choices: nothing to do
    claim: RunClaim | None = field(default=None, compare=False)  # this run's hold on the book (run_claims.py)
    # the book as checked, and its file's hash: a new job is submitted from them, not read again
    # on the main thread while the engine-load thread imports torch (reading a 5-MB EPUB took
    # 0.6-0.9 s on the build machine, docs/benchmarks.md)
    checked: Validated | None = field(default=None, compare=False)


def plan_run(rt: Runtime, book: Path, options: JobOptions, fresh: bool = False) -> RunPlan:
    """Check the book and every option, claim the book for this run, and find the unfinished job
    this run continues.

    Raises BookError / InputError for bad input (an ffmpeg that cannot make the files asked for
    too), RunClaimed (exit 2) when another live `run` is reading the same book with the same
    choices — all before anything is recorded or any model loads. The claim is let go when
    ``run_book`` ends (or this process does)."""
    from pipeline.audio.ffmpeg_check import FfmpegCheck

    with FfmpegCheck(options.formats):  # runs beside these checks; a bad book or option is said first
        check_options(rt, options)
        checked = Validated(validate_book(book, options.reading()), file_sha256(book))
    sha256 = checked.sha256
    claim = claim_run(rt.settings.data_dir, sha256, _with_library(rt, options).run_key(), str(book))
    try:
        recognise_interrupted(rt)
        unfinished = _unfinished_job(rt, book, sha256, options)
        if unfinished is not None and unfinished.job_state in JobState.active():  # a run on another host
            raise RunClaimed(f"{book}: job {unfinished.id} is reading this book right now "
                             f"(process {unfinished.runner}); wait for it, or stop it first")
        if unfinished is not None and fresh:
            _supersede(rt, unfinished.id)
            unfinished = None
        finished = None if unfinished is not None or fresh else _finished_job(rt, sha256, options)
    except BaseException:
        claim.release()
        raise
    if finished is not None:
        claim.release()  # nothing to speak
    return RunPlan(book=book, options=options, resume_job=unfinished.id if unfinished else None,
                   finished_job=finished, claim=None if finished is not None else claim, checked=checked)


def claim_job_run(rt: Runtime, job_id: int) -> RunClaim:
    """The claim a `run` of job ``job_id``'s book with its choices takes: `retry` of an embedded
    job takes it too, so a retry and a run never speak one book together. Raises RunClaimed."""
    with rt.read_session() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise NoSuchJob(job_id)
        sha256, options, name = job.source_sha256, recorded_options(job), job.source_name
    return claim_run(rt.settings.data_dir, sha256, _with_library(rt, options).run_key(), name)


def run_book(rt: Runtime, plan: RunPlan, engine: Engine | EngineLoading,
             on_stage: OnStage | None = None) -> int:
    """The whole job in this process (a new one, or ``plan.resume_job`` continued). Returns its id.

    The job ends done, failed or, stopped by a signal (RunStopped), interrupted."""
    if plan.finished_job is not None:
        return plan.finished_job
    try:
        if plan.resume_job is not None:
            job_id = resume(rt, plan.resume_job)
        else:
            job_id = submit_book(rt, plan.book, plan.options, mode=JobMode.EMBEDDED, runner=this_process(),
                                 checked=plan.checked)
        run_job(rt, job_id, engine, on_stage)
        return job_id
    finally:
        if plan.claim is not None:
            plan.claim.release()


def resume(rt: Runtime, job_id: int) -> int:
    """Reopen an interrupted or failed embedded job where it stopped (`run` again, or `retry`)."""
    retried = retry_job(rt, job_id, only_from=RETRYABLE_BY_RUN, runner=this_process())
    with rt.read_session() as session:
        progress = repo.job_progress(session, [job_id])[job_id]
    log.info("job=%s: resuming at %s: %d of %d sentences already spoken", job_id, retried.next_step,
             progress.done, progress.total)
    return job_id


def run_job(rt: Runtime, job_id: int, engine: Engine | EngineLoading,
            on_stage: OnStage | None = None) -> None:
    """Every stage of one embedded job, in this process, under its heartbeat and the stop signals;
    ``on_stage`` hears each stage as it starts and how far it is (reading, speaking, assembling...).
    ``engine`` may still be loading (``EngineLoading``): the book is read meanwhile."""
    runner = this_process()
    with run_heartbeat(rt, job_id, runner), stop_on_signals():
        try:
            _stages(rt, job_id, engine, runner, on_stage or _unheard)
        except AssemblyError:
            pass  # already recorded on the job
        except STOPPED as exc:
            _give_back(rt, job_id, interrupted_by=_signal_name(exc))
            raise RunStopped(job_id, _signal_name(exc)) from None
        except BaseException as exc:
            _give_back(rt, job_id)
            fail_job(rt, job_id, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise


def _stages(rt: Runtime, job_id: int, engine: Engine | EngineLoading, runner: str,
            on_stage: OnStage) -> None:
    """Read the book (while the engine loads, if it still does), plan it for this device, speak
    every batch as one stream through the decode slots, assemble."""
    worker = f"embedded@{socket.gethostname()}"
    on_stage(StageProgress("reading"))
    # while the engine loads, the book is read in a process of its own (one interpreter lock each)
    read = ingest_beside if isinstance(engine, EngineLoading) else ingest_job
    if not read(rt, job_id):
        return
    _give_back(rt, job_id)  # a killed run's batches: this run speaks them again
    cleanup.remove_dead_writers_of_jobs(rt, [job_id])  # and the files it was writing when it died
    planning = engine.for_planning() if isinstance(engine, EngineLoading) else engine
    register_synthesis_worker(rt, planning, worker, device_memory_bytes(planning))
    # in waves of chapters, the first assembled while the rest is spoken; a long book's first
    # waves only: the rest is planned beside their speaking
    plan_pending(rt, [job_id], opening=True)
    rest = PlanBeside(rt, job_id)
    try:
        engine = engine.get() if isinstance(engine, EngineLoading) else engine
    except BaseException:
        rest.stop()
        raise
    ahead = AssembleAhead(rt, job_id)

    def recorded(_: int | None = None) -> None:
        on_stage(speaking_progress(job_statuses(rt, job_id)[0]))
        ahead.poll()

    recorded()
    engine.clock.reset()  # the speaking's GPU timeline, logged once it ends
    try:
        speak_job(rt, engine, job_id, worker=runner, learned_by=worker, on_recorded=recorded,
                  more_planned=rest.wait)
        rest.wait()  # ended already, unless a batch could not be claimed
    except BaseException:
        rest.stop()
        ahead.abandon()
        raise
    log_device_time(f"job={job_id}", engine)
    try:  # the assembly reads the book, then waits for the stretch being prepared
        assemble_job(rt, job_id, on_stage, prepared=ahead.finish)
    finally:
        ahead.abandon()  # ended already, unless the assembly stopped before it waited


def _unheard(progress: StageProgress) -> None:
    return None


def _give_back(rt: Runtime, job_id: int, interrupted_by: str | None = None) -> None:
    """The job's batch in flight back to the queue (uncounted); the job ``interrupted`` if a
    signal stopped it."""
    with rt.session() as session:
        repo.give_back_batches(session, repo.job_batches(session, job_id, [BatchState.RUNNING]))
        if interrupted_by is not None:
            interrupt_job_in(session, job_id, f"stopped by {interrupted_by}")
        session.commit()


def _with_library(rt: Runtime, options: JobOptions) -> JobOptions:
    """``options`` as a job records them: with the library folder it was given, the default one too."""
    return replace(options, out_dir=options.out_dir or default_out_root(rt.settings.data_dir))


def _unfinished_job(rt: Runtime, book: Path, sha256: str, options: JobOptions) -> Job | None:
    """The newest embedded job of this book with these options that did not finish (or None).
    One made with other options (another speed, voice, lexicon...) is left as it is, and said so:
    its sentences were cut and spoken for those options."""
    options = _with_library(rt, options)
    with rt.read_session() as session:
        unfinished = [j for j in repo.find_jobs_by_sha256(session, sha256)
                      if j.embedded and j.job_state not in (JobState.DONE, JobState.CANCELLED)]
        same = [j for j in unfinished if options.same_run_as(recorded_options(j))]
    if not same and unfinished:
        other = unfinished[-1]
        log.warning("%s: job %s read this book with other options and did not finish; this run starts "
                    "anew (`tts-jobs retry %s` resumes that one with its own options)",
                    book, other.id, other.id)
    return same[-1] if same else None


def _finished_job(rt: Runtime, sha256: str, options: JobOptions) -> int | None:
    """The newest done job that made this book's audiobook with these choices, every file of it
    still where it was written (one whose files were removed or replaced is made again)."""
    options = _with_library(rt, options)
    with rt.read_session() as session:
        done = [j.id for j in repo.find_jobs_by_sha256(session, sha256)
                if j.job_state == JobState.DONE and options.same_run_as(recorded_options(j))
                and j.outputs and all(Path(path).is_file() for path in j.outputs)]
    return done[-1] if done else None


def _supersede(rt: Runtime, job_id: int) -> None:
    with rt.session() as session:
        repo.move_job(session, job_id, JobState.CANCELLED, only_from=(JobState.INTERRUPTED, JobState.FAILED),
                      error="superseded by `tts-jobs run --fresh`")
        session.commit()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the run as Ctrl-C does (a closed terminal, `timeout`, systemd)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _signal_name(exc: BaseException) -> str:
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT (Ctrl-C)"

"""Assembly's per-chapter work in helper processes: one Python per core, so chapters never queue
on one GIL. Chapters are measured (from their sentences' measures, taking those that are missing),
stitched, or written as final WAVs there; a GPU worker measures its sentences ahead there too.

Why: that work (pydub, trimming, the loudness meter) is many small numpy calls per sentence, each
taking the interpreter lock for a moment. Threads scale on a few cores (1.7x on two) but not on a
GPU host's 32: a book of 26,000 s of audio took 14-16 s to assemble in threads, ~2.7 cores' worth
(docs/benchmarks.md). Separate processes share no lock.

Not ``multiprocessing``: Celery's prefork processes are daemonic and may not start its children.
A helper, ``python -c 'import pipeline.audio.stitch_helpers as helper; helper.main()'``, reads pickled
``(function, arguments)`` requests on its stdin and writes each pickled result (or exception) to its
stdout, until stdin closes — so it also ends by itself when the process that started it dies.
Both ends are this package's own code (functions pickled by name): no pickle crosses a trust boundary.

Helpers are kept between assemblies (per process, at most one per core per assembly): starting
one is mostly imports (numpy, pydub and the stitch code: ~0.5 CPU-s here), so a short book uses threads, and
two books at once on 32 cores would spend more CPU starting 40 helpers than stitching. The
pool stops helpers idle for about ``HELPER_IDLE_SECONDS`` (and never hands out one that may be
ending); a helper also ends by itself after that long without work, and when the process that
started it ends. ``start_helpers`` starts them ahead (a CPU worker does at start-up, and each
assembly while it reads its book's sentences).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import select
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pipeline.audio.assembly_types import AssemblyOptions
from pipeline.audio.loudness import preload as preload_loudness_filter
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.errors import AssemblyError

log = logging.getLogger(__name__)

# Each helper is one core's worth of work: numpy's BLAS must not start a thread per core in each.
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_STOP_SECONDS = 10.0
HELPER_IDLE_SECONDS = 600.0  # a helper with no work for this long ends by itself
_HAND_OUT_SECONDS = HELPER_IDLE_SECONDS - 60.0  # idle longer: it may be ending; start another
_REAP_EVERY_SECONDS = 30.0  # how often idle helpers past _HAND_OUT_SECONDS are stopped

_niceness = 0  # added to the niceness a new helper inherits (an argument of its main)
_environment: dict[str, str] | None = None  # None: this process's, inherited as it is


def set_helper_niceness(increment: int) -> None:
    """Helpers started from now on lower their priority by ``increment`` (a GPU worker's measure
    helpers must not take the cores from the threads that feed its GPU; docs/cluster.md)."""
    global _niceness
    _niceness = increment


def set_helper_environment(environment: Mapping[str, str]) -> None:
    """Helpers started from now on get ``environment`` (the settings' copy of this process's:
    pipeline/ never reads it) with numpy's BLAS kept to one thread."""
    global _environment
    _environment = {**environment, **_ONE_THREAD}


HelperCall = tuple[int, str, Callable[..., Any], tuple[Any, ...]]  # weight, what it does, function, args
_R = TypeVar("_R")


class StitchHelper:
    """One helper process; :meth:`call` runs a function in it."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # the folder that holds pipeline/
        start = f"import sys; sys.path.insert(0, {package_root!r}); import {__name__} as helper"
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"{start}; helper.main({_niceness:d})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_environment,
        )
        self.idle_since = time.monotonic()  # never later than the helper's own idle clock starts
        self._broken = False

    def usable(self) -> bool:
        """Alive, and idle too briefly to be ending by itself."""
        return (not self._broken and self._process.poll() is None
                and time.monotonic() - self.idle_since < _HAND_OUT_SECONDS)

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, what: str, function: Callable[..., _R], *args: Any) -> _R:
        """``function(*args)`` in the helper (``what`` it does, for a message); its AssemblyError
        (or any failure) is raised here."""
        assert self._process.stdin is not None and self._process.stdout is not None
        try:
            pickle.dump((function, args), self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
            reply = pickle.load(self._process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._broken = True  # whatever is left in the pipes is not a reply to anything
            code = self._process.poll()
            raise AssemblyError(
                f"the helper process {what} died "
                f"(exit status {code}; out of memory?): run the assembly again"
            ) from exc
        finally:
            self.idle_since = time.monotonic()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self) -> None:
        self.ask_to_stop()
        self.wait_stopped()

    def ask_to_stop(self) -> None:
        """No more work (stdin closed): the helper exits on its own."""
        if self._process.stdin is not None:
            try:
                self._process.stdin.close()
            except OSError:
                pass  # it died already; wait_stopped() reaps it

    def wait_stopped(self) -> None:
        """Wait for a helper asked to stop; kill it if it does not."""
        try:
            self._process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


class _IdleHelpers:
    """This process's helpers between chapters and assemblies (thread-safe). A background thread
    stops the ones idle too long, so an idle worker keeps neither their memory nor, once they
    end, their zombie entries."""

    def __init__(self) -> None:
        self._idle: list[StitchHelper] = []
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def take(self) -> StitchHelper:
        """An idle helper that is usable, else a new one."""
        unusable = []
        with self._lock:
            while self._idle:
                helper = self._idle.pop()
                if helper.usable():
                    break
                unusable.append(helper)
            else:
                helper = None
        for stale in unusable:
            stale.close()
        return helper or StitchHelper()

    def give_back(self, helper: StitchHelper) -> None:
        """Keep a helper that is still alive for the next chapter; stop one that is not."""
        if helper.usable():
            with self._lock:
                self._idle.append(helper)
                self._start_reaper()
        else:
            helper.close()

    def start(self, count: int) -> None:
        """Start helpers until ``count`` usable ones are idle."""
        with self._lock:
            missing = count - sum(1 for helper in self._idle if helper.usable())
            self._idle.extend(StitchHelper() for _ in range(max(0, missing)))
            self._start_reaper()

    def reap(self) -> None:
        """Stop the idle helpers that are no longer usable (ended, broken or idle too long)."""
        with self._lock:
            stale = [helper for helper in self._idle if not helper.usable()]
            self._idle = [helper for helper in self._idle if helper not in stale]
        for helper in stale:
            helper.close()

    def _start_reaper(self) -> None:  # called holding the lock
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(target=self._reap_forever, name="stitch-helper-reaper",
                                            daemon=True)
            self._reaper.start()

    def _reap_forever(self) -> None:
        while True:
            time.sleep(_REAP_EVERY_SECONDS)
            self.reap()

    def stop(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        # all asked first, then waited for: each takes ~0.2 s to exit, which one after the other
        # kept a finished `tts-jobs run` from returning for seconds
        for helper in idle:
            helper.ask_to_stop()
        for helper in idle:
            helper.wait_stopped()

    def pids(self) -> list[int]:
        return [helper.pid for helper in list(self._idle)]


_helpers = _IdleHelpers()
atexit.register(_helpers.stop)


def start_helpers(count: int) -> None:
    """Have ``count`` helpers idle and ready (started now if need be: they load in the background)."""
    _helpers.start(count)


def stop_idle_helpers() -> None:
    """Stop this process's idle helpers (they also end by themselves, idle or orphaned)."""
    _helpers.stop()


def idle_helper_pids() -> list[int]:
    return _helpers.pids()


def stitch_helpers_wanted(options: AssemblyOptions, chapters: int | None = None,
                          sentences: int | None = None) -> int:
    """Helper processes for ``chapters`` chapters of ``sentences`` sentences (None: many): one per
    core, at most one per chapter; none where threads do (one chapter or core, fewer sentences
    than ``helpers_from_sentences``, ``stitch_in_processes`` off)."""
    cores = worker_count(options.threads)
    parallel = cores if chapters is None else min(cores, chapters)
    few = sentences is not None and sentences < options.helpers_from_sentences
    return parallel if options.stitch_in_processes and parallel > 1 and not few else 0


def call_in_helper(what: str, function: Callable[..., _R], *args: Any) -> _R:
    """``function(*args)`` in one of this process's idle helpers (started if none is idle)."""
    helper = _helpers.take()
    try:
        return helper.call(what, function, *args)
    finally:
        _helpers.give_back(helper)


def run_per_chapter(calls: Sequence[HelperCall], options: AssemblyOptions) -> list[Any]:
    """Run ``(weight, what, function, args)`` calls, heaviest first, results in order: in helper
    processes (:func:`stitch_helpers_wanted`), else in threads of this process. Each thread borrows
    an idle helper (started if none is) for one call at a time: a short chapter never waits behind a
    long one while another helper idles."""
    helpers = stitch_helpers_wanted(options, len(calls), sum(weight for weight, *_ in calls))
    if helpers:
        jobs = [(weight, bind(call_in_helper, what, function, *args)) for weight, what, function, args in calls]
        return run_longest_first(jobs, helpers)
    jobs = [(weight, bind(function, *args)) for weight, _, function, args in calls]
    return run_longest_first(jobs, max(1, min(worker_count(options.threads), len(calls))))


def serve(requests: BinaryIO, replies: BinaryIO, idle_seconds: float = HELPER_IDLE_SECONDS) -> None:
    """The helper's loop: one ``function(*args)`` per request, until the requests end or none
    comes for ``idle_seconds``. (One request is answered before the next is sent, so nothing
    waits in ``requests``' buffer while select() looks at the pipe.)"""
    while True:
        ready, _, _ = select.select([requests], [], [], idle_seconds)
        if not ready:
            return
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            function, args = request
            reply: object = function(*args)
        except AssemblyError as exc:
            reply = exc
        except Exception:  # a bug, not bad input: keep the traceback, which would not survive pickling
            reply = AssemblyError(f"assembly failed in a helper process:\n{traceback.format_exc()}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


def main(niceness: int = 0) -> None:
    """Run as a helper process (what :class:`StitchHelper` starts), ``niceness`` below its parent."""
    # Results go to the real stdout; anything else that prints (a library's stray print) goes to
    # stderr instead of corrupting the stream of pickles.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.nice(niceness)
    preload_loudness_filter()  # while the helper waits for its first chapter
    serve(sys.stdin.buffer, replies)

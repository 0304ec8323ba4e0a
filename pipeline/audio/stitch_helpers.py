"""Stitch chapters in helper processes: one Python per core, so chapters never queue on one GIL.

Why: stitching (pydub, trimming, the loudness meter) is many small numpy calls per sentence, each
taking the interpreter lock for a moment. Threads scale on a few cores (1.7x on two) but not on a
GPU host's 32: there the last book's assembly took 14-16 s for 26,000 s of audio, ~2.7 cores'
worth of work (docs/benchmarks.md). Separate processes share no lock.

Why plain subprocesses and not ``multiprocessing``: assembly runs in Celery's prefork pool, whose
processes are daemonic and may not start multiprocessing children. A helper is
``python -c 'import pipeline.audio.stitch_helpers as helper; helper.main()'``; it reads pickled ``stitch_chapter`` arguments on its
stdin and writes each pickled result (or exception) to its stdout, until stdin closes — so it
also ends by itself when the process that started it dies. Both ends are this package's own
code: the pickles never cross a trust boundary.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pipeline
from pipeline.audio.model import AssemblyOptions, ChapterAudio
from pipeline.audio.parallel import bind, run_longest_first, worker_count
from pipeline.audio.stitch import StitchedChapter, stitch_chapter
from pipeline.errors import AssemblyError

log = logging.getLogger(__name__)

# Each helper is one core's worth of work: numpy's BLAS must not start a thread per core in each.
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_STOP_SECONDS = 10.0

StitchRequest = tuple[ChapterAudio, Path, AssemblyOptions, int]  # stitch_chapter's arguments


class StitchHelper:
    """One helper process; :meth:`stitch` runs ``stitch_chapter`` in it."""

    def __init__(self) -> None:
        package_root = str(Path(pipeline.__file__).resolve().parents[1])
        search_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"import {__name__} as helper; helper.main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **_ONE_THREAD, "PYTHONPATH": search_path},
        )

    def stitch(self, request: StitchRequest) -> StitchedChapter:
        """Stitch one chapter in the helper; its AssemblyError (or any failure) is raised here."""
        assert self._process.stdin is not None and self._process.stdout is not None
        try:
            pickle.dump(request, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
            reply = pickle.load(self._process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            code = self._process.poll()
            raise AssemblyError(
                f"{request[1]}: the helper process stitching chapter {request[0].index + 1} died "
                f"(exit status {code}; out of memory?): run the assembly again"
            ) from exc
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self) -> None:
        """Let the helper finish (stdin closed = no more work); kill it if it does not."""
        if self._process.stdin is not None:
            try:
                self._process.stdin.close()
            except OSError:
                pass  # it died already; wait() below reaps it
        try:
            self._process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


_started_ahead: queue.SimpleQueue[StitchHelper] = queue.SimpleQueue()  # see warm_helpers


@contextmanager
def warm_helpers(count: int) -> Iterator[None]:
    """Start ``count`` helpers now for the next :func:`stitch_in_helpers` of this process.

    A helper's start is mostly imports (numpy, scipy, pydub: ~1 s on a busy host); started
    ahead they load while the caller does its own first steps (reading a book's sentences from
    the database) instead of after them. Helpers not taken by the time the block ends are
    stopped; those taken are stopped by the assembly that took them.
    """
    for _ in range(count):
        _started_ahead.put(StitchHelper())
    try:
        yield
    finally:
        while True:
            try:
                _started_ahead.get_nowait().close()
            except queue.Empty:
                break


def stitch_helpers_wanted(options: AssemblyOptions, chapters: int) -> int:
    """How many helper processes stitch ``chapters`` chapters: one per core used, at most one
    per chapter; none where threads will do (one chapter or core, or ``stitch_in_processes`` off)."""
    parallel = min(worker_count(options.threads), chapters)
    return parallel if options.stitch_in_processes and parallel > 1 else 0


def stitch_weight(request: StitchRequest) -> int:
    """How long a chapter takes to stitch, relatively: its sentence count (longest first)."""
    return len(request[0].sentences)


def stitch_in_helpers(requests: Sequence[StitchRequest], helpers: int) -> list[StitchedChapter]:
    """Stitch every request in ``helpers`` helper processes, longest chapter first.

    Each of ``helpers`` threads borrows an idle helper for one chapter at a time, so a short chapter
    never waits behind a long one while another helper idles. Helpers start on first use and are
    all stopped before this returns, on failure too.
    """
    idle: queue.SimpleQueue[StitchHelper] = queue.SimpleQueue()
    started: list[StitchHelper] = []

    def stitch(request: StitchRequest) -> StitchedChapter:
        try:
            helper = idle.get_nowait()
        except queue.Empty:
            helper = _helper_started_ahead() or StitchHelper()
            started.append(helper)  # list.append is atomic: safe from the pool's threads
        try:
            return helper.stitch(request)
        finally:
            idle.put(helper)

    jobs = [(stitch_weight(request), bind(stitch, request)) for request in requests]
    try:
        return run_longest_first(jobs, helpers)
    finally:
        for helper in started:
            helper.close()


def _helper_started_ahead() -> StitchHelper | None:
    try:
        return _started_ahead.get_nowait()
    except queue.Empty:
        return None


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The helper's loop: one ``stitch_chapter`` per request, until the requests end."""
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: object = stitch_chapter(*request)
        except AssemblyError as exc:
            reply = exc
        except Exception:  # a bug, not bad input: keep the traceback, which would not survive pickling
            reply = AssemblyError(f"stitching failed in a helper process:\n{traceback.format_exc()}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


def main() -> None:
    """Run as a helper process (what :class:`StitchHelper` starts)."""
    # Results go to the real stdout; anything else that prints (a library's stray print) goes to
    # stderr instead of corrupting the stream of pickles.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(sys.stdin.buffer, replies)

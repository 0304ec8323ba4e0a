"""A call in a forked copy of this process, its answer (or its error) handed back through a pipe.

`tts-jobs run` checks its book and options this way while its own process imports the engine's
modules (``runtime.import_engine_ahead``): both are mostly Python, and in one process they took
turns on the interpreter lock (on the build machine the checks took 1.7 s instead of 0.8 beside the
import, and torch was ready no sooner). A forked child needs no new interpreter: what this process
imported is there already. The child only reads and checks; what it prints is printed as it goes.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pipeline.errors import BookError, InputError, TtsJobsError

T = TypeVar("T")


def can_fork() -> bool:
    """A fork copies only the calling thread: one taken beside other threads could inherit a lock
    one of them held (the logging module's, the import system's) and never get it back."""
    return hasattr(os, "fork") and threading.active_count() == 1


class ForkedCall(Generic[T]):
    """``call()`` started in a forked child; ``answer()`` waits for what came of it. Without
    ``fork``, or where none can be taken (``can_fork``), ``call()`` runs here, in ``answer()``."""

    def __init__(self, call: Callable[[], T], fork: bool = True) -> None:
        self._call: Callable[[], T] | None = call
        self._pid = 0
        if not (fork and can_fork()):
            return
        read_end, write_end = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # pragma: no cover - the child's lines run in the forked copy, which never returns
            os.close(read_end)
            _answer(call, write_end)
        os.close(write_end)
        self._read_end, self._call = read_end, None

    def answer(self) -> T:
        """The call's result (picklable), or its error raised here. Bad input (BookError,
        InputError) comes back as an InputError with the same words, other errors of tts-jobs as a
        TtsJobsError, Ctrl-C as KeyboardInterrupt; anything else as a RuntimeError that holds the
        child's traceback."""
        if self._call is not None:
            return self._call()
        try:
            with os.fdopen(self._read_end, "rb") as pipe:
                answer = pipe.read()
        finally:
            _reap(self._pid)
        kind, value = pickle.loads(answer) if answer else ("died", "it ended without an answer")
        if kind == "ok":
            return value
        raise _error(kind, value)


def _answer(call: Callable[[], Any], write_end: int) -> None:
    """The child: run ``call``, write what came of it, end without unwinding this copy."""
    code = 0
    try:
        answer: tuple[str, Any] = ("ok", call())
    except KeyboardInterrupt:
        answer, code = ("interrupted", ""), 130
    except (BookError, InputError) as exc:
        answer = ("bad input", str(exc))
    except TtsJobsError as exc:
        answer = ("failed", str(exc))
    except BaseException as exc:  # a bug: its traceback goes with it
        answer = ("crashed", "".join(traceback.format_exception(exc)).rstrip())
    try:
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # an answer that cannot travel is a bug of the caller's
        data = pickle.dumps(("crashed", f"its answer cannot be handed back: {exc}"))
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(data)
    logging.shutdown()  # what it logged is out before the parent goes on
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _reap(pid: int) -> None:
    """Wait for the child; a stop here (Ctrl-C reaches both) ends it too."""
    try:
        os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise


def _error(kind: str, words: str) -> BaseException:
    if kind == "bad input":
        return InputError(words)
    if kind == "failed":
        return TtsJobsError(words)
    if kind == "interrupted":
        return KeyboardInterrupt()
    return RuntimeError(f"a forked check {kind}: {words}")

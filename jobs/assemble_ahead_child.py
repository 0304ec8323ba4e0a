"""An embedded run's chapters assembled ahead in a child process (``assemble_ahead.py``'s policy).

The run's process feeds the GPU op by op from its threads; a stretch's assembly beside them in
the same process (reading its sentences from the database, checking their files, walking the
encoders' AAC frames) would hold the interpreter lock they wait on at every op
(``pipeline/engine/host_threads.py``). The child shares nothing with them but the database and
the work directory:

- it is started at the first recorded batch that leaves chapters to prepare (a book spoken in
  one batch never starts it), and holds the book's lock (``book_lock``) for its whole life;
- each line on its stdin is an ask (a batch was recorded): it prepares what is newly spoken
  (``prepare_spoken``) and keeps the list in the work directory; with ``in_step`` it answers
  each ask once done, and the run waits for the answer;
- its stdin closing says the speaking is over: the stretch under way ends, none is begun, and
  the run's assembly takes the list (``take_prepared``);
- its log lines come to the run's log (the same loggers, the same levels);
- it ends by itself when the run dies (its stdin closes), and the run stopped by a signal ends it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from jobs.assemble_ahead import book_ahead, book_lock, prepare_spoken, spoken_chapters, take_prepared
from jobs.child_process import Child, child_runtime
from jobs.runtime import Runtime
from storage import repo

if TYPE_CHECKING:
    from pipeline.audio.prepared import PreparedChapter

log = logging.getLogger(__name__)


class AssembleAhead:
    """Embedded job ``job_id``'s chapters prepared ahead by a child process, asked after each
    recorded batch. ``in_step``: each ask waits for what it started (tests: the order of the
    waves, not how fast a machine speaks against how fast it encodes, decides what comes
    prepared)."""

    def __init__(self, rt: Runtime, job_id: int, in_step: bool = False) -> None:
        self.rt, self.job_id, self.in_step = rt, job_id, in_step
        shutil.rmtree(rt.artifacts.work_dir(job_id), ignore_errors=True)  # an earlier attempt's is not this run's
        with rt.read_session() as session:
            self._chapters = repo.chapter_count(session, job_id)
        self._child: Child | None = None
        self._gone = False  # the child could not be asked: the assembly does every chapter left

    def poll(self) -> None:
        """Ask the child to prepare what is newly spoken (started at the first ask that has
        chapters for it). Called as each batch is recorded; it never fails the recording."""
        if self._gone:
            return
        try:
            if self._child is None and spoken_chapters(self.rt, self.job_id, self._chapters) == 0:
                return
            child = (self._child or self._start()).process
            assert child.stdin is not None
            child.stdin.write("\n")
            child.stdin.flush()
            if self.in_step and child.stdout is not None:
                child.stdout.readline()
        except Exception as exc:  # noqa: BLE001 - best effort: the assembly does what is not done ahead
            self._gone = True
            log.warning("job=%s: chapters are no longer assembled ahead (%s: %s); the assembly does them",
                        self.job_id, type(exc).__name__, exc)

    def finish(self) -> list[PreparedChapter]:
        """The book is spoken: the stretch under way ends, the rest is the assembly's; the chapters
        prepared, in reading order."""
        if self._child is None:
            return []
        self._end_asks()
        self._child.wait()  # and every line it logged is in the run's log
        return take_prepared(self.rt, self.job_id)

    def abandon(self) -> None:
        """The run stops: the child ends now (what it kept stays for nobody: a resumed run starts
        anew)."""
        if self._child is not None:
            self._end_asks()
            self._child.process.terminate()

    def _start(self) -> Child:
        stdout = subprocess.PIPE if self.in_step else subprocess.DEVNULL
        self._child = Child(self.rt.settings, __name__, f"main({self.job_id:d})", stdin=subprocess.PIPE,
                            stdout=stdout)
        return self._child

    def _end_asks(self) -> None:
        assert self._child is not None and self._child.process.stdin is not None
        try:
            self._child.process.stdin.close()
        except OSError:  # the child is gone: nothing to tell it
            pass


def main(job_id: int) -> None:
    """The child: asks on stdin, one per recorded batch, until it closes."""
    from pipeline.audio.ahead import ENCODE_NICENESS
    from pipeline.audio.layout import clear_work_dir

    rt = child_runtime()
    os.nice(ENCODE_NICENESS)  # beside the threads that feed the GPU
    with book_lock(rt, job_id, wait=True):
        # what a child of an earlier attempt, ending as this one began, left there is not this run's
        # (an assembly that began meanwhile keeps what it stitched: pipeline/audio/layout.py)
        clear_work_dir(rt.artifacts.work_dir(job_id))
        book = book_ahead(rt, job_id)
        going_on = True
        for _ in sys.stdin:
            if going_on:
                _, going_on = prepare_spoken(rt, job_id, book)
            sys.stdout.write(f"{len(book.prepared)}\n")
            sys.stdout.flush()

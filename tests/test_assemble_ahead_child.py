"""An embedded run's chapters assembled ahead by a child process (``jobs/assemble_ahead_child.py``):
its log lines reach the run's log, a child that cannot start leaves the assembly every chapter, and
one that begins late leaves what the assembly already stitched. The real engine (tiny weights,
CPU), the real job table, real ffmpeg."""

from __future__ import annotations

import logging
from pathlib import Path

from jobs.choices.options import JobOptions
from jobs.embedded import plan_run, run_book
from jobs.runtime import Runtime
from jobs.status import job_statuses
from tests.books import write_epub
from tests.e2e_helpers import ffprobe_chapters
from tests.test_assemble_ahead import CHAPTERS


def test_the_childs_log_lines_reach_the_runs_log_at_their_levels(caplog) -> None:  # type: ignore[no-untyped-def]
    """What the child process logs (one record a line) is logged by the run under the same
    logger and level; a line that is not a record (a traceback's) comes as a warning."""
    import io

    from jobs.child_process import relay

    caplog.set_level(logging.DEBUG)
    relay(io.StringIO("INFO pipeline.audio.ahead: 3 chapter(s) assembled ahead (1-3 of 9) in 0.4 s\n"
                      "WARNING jobs.assemble_ahead: job=4: chapters 4-6 not assembled ahead (OSError: disk)\n"
                      "Traceback (most recent call last):\n"))

    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("pipeline.audio.ahead", "INFO", "3 chapter(s) assembled ahead (1-3 of 9) in 0.4 s"),
        ("jobs.assemble_ahead", "WARNING", "job=4: chapters 4-6 not assembled ahead (OSError: disk)"),
        ("jobs.child_process", "WARNING", "Traceback (most recent call last):"),
    ]


def test_a_run_whose_assembling_ahead_cannot_start_still_makes_its_audiobook(
        rt: Runtime, tmp_path: Path, tiny_engine, caplog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The child process cannot be started (no such program, a full process table): the run
    says so once and goes on; the assembly does every chapter."""
    from jobs.assemble_ahead_child import AssembleAhead

    def cannot_start(self: AssembleAhead):  # type: ignore[no-untyped-def]
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(AssembleAhead, "_start", cannot_start)
    caplog.set_level(logging.INFO)
    book = write_epub(tmp_path / "alone.epub", "Alone", CHAPTERS)

    job_id = run_book(rt, plan_run(rt, book, JobOptions(out_dir=tmp_path / "out")), tiny_engine)

    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    warnings = [r.getMessage() for r in caplog.records if "no longer assembled ahead" in r.getMessage()]
    assert len(warnings) == 1 and "Resource temporarily unavailable" in warnings[0]
    assert not [r for r in caplog.records if "chapter(s) assembled ahead" in r.getMessage()]
    assert len(ffprobe_chapters(Path(status.outputs[0]))) == 5


def test_a_child_that_begins_after_the_assembly_leaves_what_the_assembly_stitched(
        rt: Runtime, tmp_path: Path, tiny_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The assembly lays out its chapters while the child may still be starting (a book spoken
    before the child's imports were done): the child, clearing what an earlier attempt left in
    the work directory, leaves the chapters the assembly stitched there, and the book is made."""
    from jobs import embedded
    from jobs.assemble_ahead_child import AssembleAhead

    class StartsLate(AssembleAhead):
        def poll(self) -> None:  # no child while the book is spoken
            return None

        def finish(self):  # type: ignore[no-untyped-def]
            self._start()  # it begins only once the assembly has laid out its chapters
            return super().finish()

    monkeypatch.setattr(embedded, "AssembleAhead", StartsLate)
    book = write_epub(tmp_path / "late.epub", "Late", CHAPTERS)

    job_id = run_book(rt, plan_run(rt, book, JobOptions(out_dir=tmp_path / "out")), tiny_engine)

    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    assert len(ffprobe_chapters(Path(status.outputs[0]))) == 5

"""Chapters stitched in helper processes: the same audiobook as in threads, and failures that say so."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from pipeline.audio import AssemblyOptions, assemble_audiobook, start_helpers
from pipeline.audio.stitch_helpers import idle_helper_pids, stitch_helpers_wanted, stop_idle_helpers
from pipeline.bench.synthetic_audio import tone_book
from pipeline.errors import AssemblyError
from pipeline.types import BookMetadata

METADATA = BookMetadata(title="Helpers")
HELPER_MARK = b"pipeline.audio.stitch_helpers"


@pytest.fixture(autouse=True)
def no_helpers_before_or_after():
    """Each test starts without idle helpers, and stops the ones it leaves."""
    stop_idle_helpers()
    yield
    stop_idle_helpers()
    assert helper_pids() == []  # nothing outside the idle pool either


@pytest.fixture
def chapters(tmp_path):
    return tone_book(tmp_path / "sentences", ["One", "Two", "Three"], body_sentences=3)


def helper_pids() -> list[int]:
    """Helper processes started by this test process (from /proc: no psutil needed)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent) == os.getpid() and HELPER_MARK in cmdline:
            pids.append(int(entry.name))
    return pids


def assemble(chapters, tmp_path, name, **options):
    return assemble_audiobook(chapters, METADATA, tmp_path / name / "out", tmp_path / name / "work",
                              AssemblyOptions(formats=("wav", "m4b"), threads=2, helpers_from_sentences=0, **options))


def test_helpers_make_the_same_audiobook_as_threads(tmp_path, chapters):
    in_helpers = assemble(chapters, tmp_path, "helpers")
    in_threads = assemble(chapters, tmp_path, "threads", stitch_in_processes=False)
    assert [p.name for p in in_helpers.outputs] == [p.name for p in in_threads.outputs]
    for mine, theirs in zip(in_helpers.outputs, in_threads.outputs, strict=True):
        assert mine.read_bytes() == theirs.read_bytes(), mine.name
    assert in_helpers.chapters == in_threads.chapters
    assert in_helpers.measured_lufs == in_threads.measured_lufs
    assert in_helpers.gain_db == in_threads.gain_db
    assert sorted(helper_pids()) == sorted(idle_helper_pids())  # every helper back in the pool


def test_helpers_are_kept_and_reused_by_the_next_assembly(tmp_path, chapters):
    assemble(chapters, tmp_path, "first")
    kept = sorted(idle_helper_pids())
    assert len(kept) == 2  # threads=2
    assemble(chapters, tmp_path, "second")
    assert sorted(idle_helper_pids()) == kept == sorted(helper_pids())  # no new process started


def test_a_helpers_error_names_the_sentence_file(tmp_path, chapters):
    damaged = chapters[2].sentences[1].path
    damaged.write_bytes(b"this is not audio at all" * 40)
    with pytest.raises(AssemblyError, match="corrupt") as error:
        assemble(chapters, tmp_path, "book")
    assert str(damaged) in str(error.value)
    assert not (tmp_path / "book" / "out").exists() or list((tmp_path / "book" / "out").iterdir()) == []
    assert sorted(helper_pids()) == sorted(idle_helper_pids())  # bad input leaves the helper usable


def test_a_killed_helper_fails_the_assembly_clearly(tmp_path, chapters):
    # One sentence is a FIFO nobody writes to: the helper reading it blocks until it is killed, as the
    # kernel's out-of-memory killer would kill it.
    stuck = chapters[1].sentences[0].path
    stuck.unlink()
    os.mkfifo(stuck)
    killed = []

    def kill_the_stuck_helper() -> None:
        with open(stuck, "wb"):  # returns once a helper has opened the FIFO to read it
            for pid in helper_pids():
                if any(os.path.realpath(fd.path) == str(stuck) for fd in os.scandir(f"/proc/{pid}/fd")):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    killer = threading.Thread(target=kill_the_stuck_helper)
    killer.start()
    try:
        with pytest.raises(AssemblyError, match="died") as error:
            assemble(chapters, tmp_path, "book")
    finally:
        killer.join()
    assert killed
    assert "chapter 2" in str(error.value) and "run the assembly again" in str(error.value)
    assert "'Two'" in str(error.value)  # the chapter's title
    assert list((tmp_path / "book" / "out").iterdir()) == []
    assert killed[0] not in idle_helper_pids()  # the dead helper is not handed out again
    assert sorted(helper_pids()) == sorted(idle_helper_pids())


def test_helpers_started_ahead_do_the_stitching(tmp_path, chapters):
    start_helpers(2)
    ahead = sorted(idle_helper_pids())
    assert len(ahead) == 2
    report = assemble(chapters, tmp_path, "book")  # threads=2
    assert len(report.outputs) == 4
    assert sorted(helper_pids()) == ahead  # they did the work: none was started for it


def test_an_idle_helper_ends_by_itself(tmp_path):
    import subprocess
    import sys

    helper = subprocess.Popen([sys.executable, "-c", "import pipeline.audio.stitch_helpers as h, sys; "
                               "h.serve(sys.stdin.buffer, sys.stdout.buffer, idle_seconds=0.5)"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert helper.wait(timeout=60) == 0  # its stdin is still open: it ended on its own
    finally:
        helper.kill()
        helper.stdin.close()
        helper.stdout.close()


def test_helpers_idle_too_long_are_stopped_by_the_pool(monkeypatch):
    from pipeline.audio import stitch_helpers

    start_helpers(2)
    started = idle_helper_pids()
    assert len(started) == 2
    monkeypatch.setattr(stitch_helpers, "_HAND_OUT_SECONDS", 0.0)  # as if idle for nine minutes
    stitch_helpers._helpers.reap()  # what the pool's reaper thread does every half minute
    assert idle_helper_pids() == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in started)  # ended and reaped: no zombies


def test_a_short_book_is_stitched_in_threads_and_starts_no_helper(tmp_path, chapters):
    """A helper costs about a CPU-second to start: a book of fewer sentences than
    ``helpers_from_sentences`` is stitched in this process's threads, a longer one in helpers."""
    report = assemble_audiobook(chapters, METADATA, tmp_path / "out", tmp_path / "work",
                                AssemblyOptions(formats=("wav", "m4b"), threads=2))

    assert [p.suffix for p in report.outputs].count(".m4b") == 1
    assert helper_pids() == []  # none started, none left
    options = AssemblyOptions(threads=4)
    assert stitch_helpers_wanted(options, chapters=10, sentences=options.helpers_from_sentences - 1) == 0
    assert stitch_helpers_wanted(options, chapters=10, sentences=options.helpers_from_sentences) == 4
    assert stitch_helpers_wanted(options, chapters=2, sentences=10_000) == 2  # one per chapter at most


def test_helpers_start_with_the_environment_the_settings_give_and_blas_on_one_thread(monkeypatch):
    """pipeline/ never reads the process environment: a helper started after the jobs layer gave
    the settings' copy sees that copy (a variable set since then is not in it), with numpy's BLAS
    kept to one thread (one helper per core must not start a BLAS thread per core each)."""
    from jobs.settings import process_environment
    from pipeline.audio import stitch_helpers

    monkeypatch.setattr(stitch_helpers, "_environment", None)  # this process's helpers as a fresh one
    monkeypatch.setenv("TTS_JOBS_HELPER_MARK", "given")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    stitch_helpers.set_helper_environment(process_environment())
    monkeypatch.setenv("TTS_JOBS_HELPER_MARK", "changed later")
    seen = [stitch_helpers.call_in_helper("reading its environment", os.getenv, name)
            for name in ("TTS_JOBS_HELPER_MARK", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")]
    assert seen == ["given", "1", "1"]

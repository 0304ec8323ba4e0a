"""Chapters stitched in helper processes: the same audiobook as in threads, and failures that say so."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from pipeline.audio import AssemblyOptions, assemble_audiobook, warm_helpers
from pipeline.audio.synthetic import tone_book
from pipeline.errors import AssemblyError
from pipeline.types import BookMetadata

METADATA = BookMetadata(title="Helpers")
HELPER_MARK = b"pipeline.audio.stitch_helpers"


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
                              AssemblyOptions(formats=("wav", "m4b"), threads=2, **options))


def test_helpers_make_the_same_audiobook_as_threads(tmp_path, chapters):
    in_helpers = assemble(chapters, tmp_path, "helpers")
    in_threads = assemble(chapters, tmp_path, "threads", stitch_in_processes=False)
    assert [p.name for p in in_helpers.outputs] == [p.name for p in in_threads.outputs]
    for mine, theirs in zip(in_helpers.outputs, in_threads.outputs, strict=True):
        assert mine.read_bytes() == theirs.read_bytes(), mine.name
    assert in_helpers.chapters == in_threads.chapters
    assert in_helpers.measured_lufs == in_threads.measured_lufs
    assert in_helpers.gain_db == in_threads.gain_db
    assert helper_pids() == []  # every helper stopped


def test_a_helpers_error_names_the_sentence_file(tmp_path, chapters):
    damaged = chapters[2].sentences[1].path
    damaged.write_bytes(b"this is not audio at all" * 40)
    with pytest.raises(AssemblyError, match="corrupt") as error:
        assemble(chapters, tmp_path, "book")
    assert str(damaged) in str(error.value)
    assert not (tmp_path / "book" / "out").exists() or list((tmp_path / "book" / "out").iterdir()) == []
    assert helper_pids() == []


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
    assert "chapter_0002.wav" in str(error.value)
    assert list((tmp_path / "book" / "out").iterdir()) == []
    assert helper_pids() == []


def test_helpers_started_ahead_do_the_stitching_and_none_outlive_the_block(tmp_path, chapters):
    with warm_helpers(3):
        ahead = set(helper_pids())
        assert len(ahead) == 3
        report = assemble(chapters, tmp_path, "book")  # threads=2: takes two of the three
        assert len(report.outputs) == 4
        left = set(helper_pids())
        assert len(left) == 1 and left < ahead  # no new helper was started; the third still waits
    assert helper_pids() == []

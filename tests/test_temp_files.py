"""No temporary file outlives its writer: a file half-written by a process that was killed is
removed by the next sweep or run on the host, while a live writer's work in progress is kept."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np

from jobs.batches import cleanup
from jobs.cluster.worker_process import sweep
from jobs.runtime import Runtime
from jobs.submit import submit_book
from pipeline.audio.wavio import write_sentence_wav
from pipeline.temp_files import remove_dead_writers_files, temporary_sibling
from storage.models import JobMode
from tests.books import write_epub
from tests.e2e_helpers import killed_mid_write


def test_a_dead_writers_file_goes_at_once_a_live_ones_stays(tmp_path: Path) -> None:
    dead = killed_mid_write(tmp_path / "audio" / "c0001" / "s00001.wav")
    live = temporary_sibling(tmp_path / "audio" / "c0001" / "s00002.wav")
    live.write_bytes(b"being written")  # this process: alive
    elsewhere = tmp_path / f".s3.wav~{socket.gethostname()}-other~123~abcd.tmp"  # another host's writer
    elsewhere.write_bytes(b"")
    legacy = tmp_path / ".s4.wav.x1y2z3.tmp"  # named before writers were: judged by its age
    legacy.write_bytes(b"")
    old = time.time() - 3600
    os.utime(legacy, (old, old))

    removed = remove_dead_writers_files(tmp_path)

    assert sorted(removed) == sorted([dead, legacy])
    assert live.is_file() and elsewhere.is_file()
    os.utime(elsewhere, (old, old))
    assert remove_dead_writers_files(tmp_path) == [elsewhere]  # settled: its writer is long gone


def test_writers_name_their_files_and_leave_none_behind(tmp_path: Path) -> None:
    final = tmp_path / "s00001.wav"
    write_sentence_wav(final, np.zeros(2400, dtype=np.float32))
    assert [p.name for p in tmp_path.iterdir()] == ["s00001.wav"]
    assert final.stat().st_mode & 0o044  # as readable as any file the user makes, not mkstemp's 0600
    assert temporary_sibling(final).name.startswith(f".s00001.wav~{socket.gethostname()}~{os.getpid()}~")


def test_the_periodic_sweep_removes_what_a_killed_worker_was_writing(rt: Runtime, tmp_path: Path) -> None:
    book = write_epub(tmp_path / "book.epub", "Swept", [("One", ["A sentence to read."])])
    in_flight = submit_book(rt, book, _options(tmp_path))
    finished_elsewhere = rt.artifacts.job_dir(in_flight + 1000) / "audio" / "s.wav"
    partial = killed_mid_write(rt.artifacts.job_dir(in_flight) / "audio" / "c0000" / "s00000.wav")
    untouched = killed_mid_write(finished_elsewhere)  # no job in flight there: left to a worker's start

    sweep(rt)

    assert not partial.exists() and untouched.exists()
    assert cleanup.remove_orphan_files(rt) >= 1 and not untouched.exists()  # a worker's start sweeps all


def test_an_assembly_removes_its_book_folders_half_written_files(rt: Runtime, tmp_path: Path) -> None:
    book = write_epub(tmp_path / "book.epub", "Folder", [("One", ["A sentence to read."])])
    job = submit_book(rt, book, _options(tmp_path), mode=JobMode.EMBEDDED)
    folder = tmp_path / "out" / "Folder"
    partial = killed_mid_write(folder / "Folder.m4b", "partial")

    assert cleanup.remove_dead_writers_of_jobs(rt, [job], folder) == 1
    assert not partial.exists() and folder.is_dir()


def _options(tmp_path: Path):  # type: ignore[no-untyped-def]
    from jobs.choices.options import JobOptions

    return JobOptions(out_dir=tmp_path / "out")

"""`tts-jobs status` as people read it: a table that fits 80 columns, full values when piped, a
hint when there is nothing, JSON in UTF-8; and speed, elapsed time and ETA from what was measured."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from jobs.choices.options import JobOptions
from jobs.ingest import ingest_job
from jobs.runtime import Runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from storage.models import Batch, BatchState, Job, JobState, Sentence, SentenceState, utcnow
from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import TTS_JOBS, cli
from tests.test_cli_progress import ANSI, run_in_terminal

LONG_TITLE = "The Remarkably Long and Winding Account of a Voyage Nobody Asked For"
CHINESE_TITLE = "爱丽丝梦游仙境与镜中奇遇记：完整版的长标题"
CHAPTERS = [("One", ["A first sentence that is fairly long, as sentences go.", "Short one."]),
            ("Two", ["Another sentence.", "And the very last one of this small book."])]


def _submitted(rt: Runtime, tmp_path: Path, title: str, name: str) -> int:
    book = write_epub(tmp_path / f"{name}.epub", title, CHAPTERS)
    return submit_book(rt, book, JobOptions(formats=("wav",)))


def test_a_terminal_of_80_columns_gets_a_table_that_fits_and_status_job_the_full_title(  # type: ignore[no-untyped-def]
        rt, tmp_path: Path) -> None:
    first = _submitted(rt, tmp_path, LONG_TITLE, "long")
    _submitted(rt, tmp_path, CHINESE_TITLE, "chinese")
    env = env_for(rt.settings)

    code, table = run_in_terminal([*TTS_JOBS, "status"], env, columns=80)
    code_detail, detail = run_in_terminal([*TTS_JOBS, "status", str(first)], env, columns=80)

    assert code == 0 and code_detail == 0, table + detail
    lines = [ANSI.sub("", line) for line in table.replace("\r", "").splitlines() if line.strip()]
    from rich.cells import cell_len

    assert lines[0].split()[:3] == ["id", "title", "state"] and len(lines) == 3, lines
    assert all(cell_len(line) <= 80 for line in lines), lines
    assert LONG_TITLE not in table and any("…" in line for line in lines)  # shortened, one line each
    assert LONG_TITLE in ANSI.sub("", detail)


def test_piped_status_is_tab_separated_with_full_values_under_a_header(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = _submitted(rt, tmp_path, LONG_TITLE, "long")
    second = _submitted(rt, tmp_path, CHINESE_TITLE, "chinese")

    result = cli(["status"], env_for(rt.settings), timeout=60)

    assert result.returncode == 0, result.stderr
    header, *rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert header[:4] == ["id", "title", "state", "sentences"] and "eta" in header
    assert all(len(row) == len(header) for row in rows)
    assert [(row[0], row[1], row[2]) for row in rows] == [(str(second), CHINESE_TITLE, "queued"),
                                                           (str(first), LONG_TITLE, "queued")]
    assert "\x1b[" not in result.stdout  # no colours or boxes for the next program


def test_status_without_jobs_says_how_to_start_one(settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())

    piped = cli(["status"], env, timeout=60)
    code, on_terminal = run_in_terminal([*TTS_JOBS, "status"], env, columns=80)

    assert piped.returncode == 0 and piped.stdout == ""  # nothing for a program to mistake for a job
    assert "no jobs yet" in piped.stderr and "tts-jobs run BOOK" in piped.stderr
    assert code == 0 and "no jobs yet" in on_terminal and "tts-jobs run BOOK" in on_terminal
    assert "┏" not in on_terminal and "━" not in on_terminal  # no empty table


def test_json_keeps_chinese_titles_readable_in_utf8(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job = _submitted(rt, tmp_path, CHINESE_TITLE, "chinese")
    env = {**env_for(rt.settings), "LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "ascii"}

    listed = cli(["status", "--json"], env, timeout=60)
    one = cli(["status", str(job), "--json"], env, timeout=60)

    for result in (listed, one):
        assert result.returncode == 0, result.stderr
        assert CHINESE_TITLE in result.stdout and "\\u" not in result.stdout
    assert json.loads(listed.stdout)[0]["title"] == json.loads(one.stdout)["title"] == CHINESE_TITLE
    for field in ("length_seconds", "elapsed_seconds", "synthesis_seconds", "created_at", "x_realtime",
                  "eta_seconds", "sentences_done", "audio_seconds"):
        assert field in json.loads(one.stdout)


# ---------------------------------------------------------------- speed, elapsed, ETA


def _read_job(rt: Runtime, tmp_path: Path, chapters: list[tuple[str, list[str]]]) -> int:
    book = write_epub(tmp_path / "measured.epub", "Measured", chapters)
    job_id = submit_book(rt, book, JobOptions(formats=("wav",)))
    assert ingest_job(rt, job_id)
    return job_id


def _speak(rt: Runtime, job_id: int, sentence_ids: list[int], began_ago: float, ended_ago: float) -> None:
    """Record sentences as spoken (one audio second per character) by a batch that ran then."""
    now = utcnow()
    with rt.session() as session:
        batch = Batch(state=BatchState.DONE.value, size=len(sentence_ids), leased_by="test:1",
                      leased_at=now - timedelta(seconds=began_ago),
                      finished_at=now - timedelta(seconds=ended_ago))
        session.add(batch)
        session.flush()
        for sentence in session.query(Sentence).filter(Sentence.id.in_(sentence_ids)):
            sentence.state, sentence.batch_id = SentenceState.DONE.value, batch.id
            sentence.audio_seconds = float(len(sentence.text))
        session.commit()


def _sentences(rt: Runtime, job_id: int) -> list[Sentence]:
    with rt.read_session() as session:
        rows = session.query(Sentence).filter(Sentence.job_id == job_id).all()
        session.expunge_all()
        return sorted(rows, key=lambda s: -len(s.text))  # the planner's order: longest first


def test_the_eta_is_the_text_left_at_the_measured_text_rate_not_a_count_of_sentences(  # type: ignore[no-untyped-def]
        rt, tmp_path: Path) -> None:
    long = "This sentence is a long one, spoken first because the planner takes the longest first."
    short = ["Short.", "Tiny.", "Small.", "Brief.", "Quick."]
    job_id = _read_job(rt, tmp_path, [("Only", [long, long, *short])])
    sentences = _sentences(rt, job_id)
    assert job_statuses(rt, job_id)[0].eta_seconds is None  # nothing measured yet: no guess

    _speak(rt, job_id, [s.id for s in sentences[:2]], began_ago=100.0, ended_ago=10.0)

    status = job_statuses(rt, job_id)[0]
    done_characters = sum(len(s.text) for s in sentences[:2])
    left_characters = sum(len(s.text) for s in sentences[2:])
    assert status.x_realtime == pytest.approx(done_characters / 100.0, rel=0.05)
    assert status.eta_seconds == pytest.approx(left_characters / (done_characters / 100.0), rel=0.05)
    by_sentences = 100.0 * (len(sentences) - 2) / 2
    assert status.eta_seconds < by_sentences / 3  # what a count of sentences would have promised


def test_a_done_job_keeps_its_speed_over_the_time_its_batches_ran_and_its_elapsed_time(  # type: ignore[no-untyped-def]
        rt, tmp_path: Path) -> None:
    job_id = _read_job(rt, tmp_path, [("Only", ["First sentence here.", "Second one.", "Third and last."])])
    ids = [s.id for s in _sentences(rt, job_id)]  # the chapter's title is spoken too
    _speak(rt, job_id, ids[:1], began_ago=300.0, ended_ago=290.0)  # 10 s
    _speak(rt, job_id, ids[1:2], began_ago=295.0, ended_ago=280.0)  # beside it: 10 s more, not 15
    _speak(rt, job_id, ids[2:], began_ago=100.0, ended_ago=90.0)  # after a pause: 10 s
    with rt.session() as session:
        job = session.get(Job, job_id)
        job.state, job.created_at = JobState.DONE.value, utcnow() - timedelta(seconds=400)
        job.finished_at = utcnow() - timedelta(seconds=50)
        job.report = {"total_seconds": 123.4}
        session.commit()

    status = job_statuses(rt, job_id)[0]

    assert status.synthesis_seconds == pytest.approx(30.0, abs=0.1)
    assert status.x_realtime == pytest.approx(status.audio_seconds / 30.0, rel=0.01)
    assert status.elapsed_seconds == pytest.approx(350.0, abs=1.0)
    assert status.length_seconds == 123.4 and status.eta_seconds is None
    row = cli(["status"], env_for(rt.settings), timeout=60).stdout.splitlines()[1].split("\t")
    assert row[4:7] == ["0:02:03", f"{status.x_realtime:.1f}", "0:05:50"]  # audio = the file's length


def test_status_rows_have_no_ansi_even_when_colour_is_forced(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _submitted(rt, tmp_path, LONG_TITLE, "long")
    result = cli(["status"], {**env_for(rt.settings), "FORCE_COLOR": "1"}, timeout=60)
    assert result.returncode == 0 and not re.search(r"\x1b\[", result.stdout)
    assert result.stdout.splitlines()[0].startswith("id\ttitle")


def test_an_assembly_no_worker_holds_says_what_will_move_it(rt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A lost assembly message (Redis down) waits for a worker's sweep: status says so, and how to
    send it now; a fresh one, or one a live worker holds, reads plain 'assembling'."""
    lost, fresh = (_submitted(rt, tmp_path, title, name) for title, name in (("Lost", "lost"), ("Fresh", "fresh")))
    with rt.session() as session:
        for job, age in ((lost, 2 * rt.settings.lease_seconds), (fresh, 0)):
            row = session.get(Job, job)
            row.state, row.runner = JobState.ASSEMBLING.value, None
            row.updated_at = utcnow() - timedelta(seconds=age)
        session.commit()

    waiting = {s.id: s.waiting for s in job_statuses(rt)}
    shown = cli(["status", str(lost)], env_for(rt.settings), timeout=60)

    assert waiting[fresh] is None
    assert waiting[lost] == ("no worker holds its assembly: a running worker's sweep sends it again within a "
                             f"minute (`tts-jobs retry {lost}` sends it now)")
    assert shown.returncode == 0 and f"tts-jobs retry {lost}` sends it now" in shown.stdout

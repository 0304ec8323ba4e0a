"""An embedded run assembles its first chapters while the rest of the book is spoken: the real
engine (tiny weights, CPU), the real job table, real ffmpeg."""

from __future__ import annotations

import logging
from pathlib import Path

from jobs.choices.options import JobOptions
from jobs.embedded import plan_run, run_book
from jobs.runtime import Runtime
from jobs.status import job_statuses
from pipeline.batching import in_waves
from storage import repo
from tests.books import write_epub
from tests.e2e_helpers import ffprobe_chapters
from tests.m4b_encodes import spy_m4b_encodes

CHAPTERS = [(f"Chapter {n}", [f"Sentence {n}.{k} of a book read in waves." for k in range(1, 4)])
            for n in range(1, 6)]


def test_the_first_chapters_are_assembled_while_the_rest_is_spoken(
        rt: Runtime, tmp_path: Path, tiny_engine, caplog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The book is spoken in waves of chapters; its first chapters are assembled (and encoded for
    the M4B) before the last batch is recorded, the assembly after it encodes the last chapter,
    and the M4B has every chapter, in order, each mark at its own audio."""
    from functools import partial

    from jobs import embedded
    from jobs.assemble_ahead_child import AssembleAhead

    encoded = spy_m4b_encodes(monkeypatch)
    # Each stretch is prepared before the next batch is recorded: the order of the waves, not how
    # fast this machine speaks against how fast it encodes, decides what comes prepared.
    monkeypatch.setattr(embedded, "AssembleAhead", partial(AssembleAhead, in_step=True))
    book = write_epub(tmp_path / "waves.epub", "Waves", CHAPTERS)
    caplog.set_level(logging.INFO)

    job_id = run_book(rt, plan_run(rt, book, JobOptions(out_dir=tmp_path / "out")), tiny_engine)

    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    ahead = [r.getMessage() for r in caplog.records if "assembled ahead" in r.getMessage()]
    assert ahead and all("of 5" in line for line in ahead)
    assert "in 5 waves of chapters" in caplog.text
    # the assembly encodes the last chapter (and any spoken together with it); the first come prepared
    assert 4 in encoded and not {0, 1} & set(encoded)
    marks = ffprobe_chapters(Path(status.outputs[0]))
    assert [m["tags"]["title"] for m in marks] == [title for title, _ in CHAPTERS]
    starts = [float(m["start_time"]) for m in marks]
    assert starts == sorted(starts) and len(set(starts)) == 5


def test_waves_are_whole_chapters_of_about_equal_length_in_reading_order() -> None:
    """Eight chapters of 10 sentences each in 4 waves: 2 chapters a wave, never a chapter split,
    every sentence once, in reading order; one wave is the whole book. Each book's first wave
    says so (its first batch takes the lead: ``plan_batches``)."""
    rows = [_Row(i, chapter) for i, chapter in enumerate(c for c in range(8) for _ in range(10))]
    waves = in_waves(rows, 4)
    assert _ids(waves) == [list(range(k * 20, k * 20 + 20)) for k in range(4)]
    assert [opens for _, opens in waves] == [True, False, False, False]
    assert in_waves(rows, 1) == [(rows, True)]
    assert len(in_waves(rows[:10], 4)) == 1  # one chapter cannot be split
    # two books planned together: each in its own waves, the first book's before the second's
    chapters = [(c, 1) for c in range(4) for _ in range(10)] + [(c, 2) for c in range(10, 12) for _ in range(10)]
    rows = [_Row(i, chapter, job) for i, (chapter, job) in enumerate(chapters)]
    waves = in_waves(rows, 4)
    assert _ids(waves) == [list(range(k * 10, k * 10 + 10)) for k in range(6)]
    assert [opens for _, opens in waves] == [True, False, False, False, True, False]


def test_a_book_planned_in_two_goes_gets_the_same_waves_and_opens_once() -> None:
    """A run plans its book's first two waves (``first``), speaks them, and plans the rest beside:
    the rest (three quarters of the book ``left``) comes in the three waves it would have had,
    none of them opening the book again (no second lead); books not begun open as before."""
    rows = [_Row(i, chapter) for i, chapter in enumerate(c for c in range(8) for _ in range(10))]
    opening = in_waves(rows, 4, first=2)
    assert _ids(opening) == [list(range(0, 20)), list(range(20, 40))]
    assert [opens for _, opens in opening] == [True, False]
    rest = in_waves(rows[40:], 4, left={1: 0.5})
    assert _ids(rest) == [list(range(40, 60)), list(range(60, 80))]
    assert [opens for _, opens in rest] == [False, False]
    other = [_Row(100 + i, 50 + i // 10, job_id=2) for i in range(40)]
    mixed = in_waves(rows[70:] + other, 4, left={1: 0.125})
    assert _ids(mixed) == [list(range(70, 80)), *[list(range(100 + k * 10, 110 + k * 10)) for k in range(4)]]
    assert [opens for _, opens in mixed] == [False, True, False, False, False]


class _Row:
    """A sentence as the planner reads it from the database."""

    def __init__(self, row_id: int, chapter_id: int, job_id: int = 1, max_new_tokens: int = 50) -> None:
        self.id, self.chapter_id, self.job_id, self.max_new_tokens = row_id, chapter_id, job_id, max_new_tokens


def _ids(waves: list) -> list[list[int]]:  # type: ignore[type-arg]
    return [[row.id for row in wave] for wave, _ in waves]


def test_a_cluster_task_prepares_only_a_book_still_being_spoken_and_only_one_at_a_time(
        rt: Runtime, tmp_path: Path) -> None:
    """The CPU task finds nothing to do, and leaves no work directory, for a book no longer being
    spoken (its assembly has begun: the assembly owns the work directory) or while another task
    holds the book's lock (that one looks again before it stops)."""
    from jobs.assemble_ahead import book_lock, prepare_ahead, take_prepared
    from jobs.submit import submit_book

    book = write_epub(tmp_path / "book.epub", "Guarded", CHAPTERS[:2])
    job_id = submit_book(rt, book, JobOptions(out_dir=tmp_path / "out"))  # queued: not being spoken
    assert prepare_ahead(rt, job_id) == 0
    assert not rt.artifacts.work_dir(job_id).exists()
    with book_lock(rt, job_id, wait=False) as held:
        assert held
        assert prepare_ahead(rt, job_id) == 0  # another task holds the book
    assert take_prepared(rt, job_id) == []


def test_a_chapter_spoken_again_after_a_cpu_task_prepared_it_is_prepared_again(rt: Runtime, tmp_path: Path) -> None:
    """A CPU task prepares a book's first three spoken chapters (of five) in its work directory;
    then a retried batch speaks chapter two again into the same files. The next task keeps
    chapter one as it was and prepares chapter two and the one after it again, from the new audio;
    the assembly task takes that list. The last chapter is never prepared ahead."""
    from jobs.assemble_ahead import prepare_ahead, take_prepared
    from jobs.ingest import ingest_job
    from jobs.submit import submit_book

    book = write_epub(tmp_path / "book.epub", "Respoken", CHAPTERS)
    job_id = submit_book(rt, book, JobOptions(out_dir=tmp_path / "out"))
    assert ingest_job(rt, job_id)

    def speak(chapters: set[int], seconds: float) -> None:
        speak_chapters(rt, job_id, chapters, seconds)

    speak({0, 1, 2}, 0.5)
    assert prepare_ahead(rt, job_id) == 3
    first = take_prepared(rt, job_id)
    speak({1}, 1.5)  # a retried batch: the same sentences, new files at the same paths
    assert prepare_ahead(rt, job_id) == 2  # chapters two and three again; chapter one kept
    again = take_prepared(rt, job_id)

    assert [c.audio.index for c in again] == [0, 1, 2]
    assert again[0].stamps == first[0].stamps
    assert again[1].stamps != first[1].stamps
    assert again[1].measured.samples > first[1].measured.samples + 24000 * 2  # the new, longer sentences
    speak({3, 4}, 0.5)
    assert prepare_ahead(rt, job_id) == 0  # the whole book is spoken: the rest is the assembly's


def test_a_book_behind_its_speaking_is_prepared_a_wave_of_chapters_at_a_time(
        rt: Runtime, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """Ten of seventeen chapters spoken before the preparation could look: it prepares them in
    stretches of a wave's worth (17 / 8 waves: three chapters), so that the speaking's end finds
    at most a wave under way, and the assembly, on every core, begins on the rest."""
    from jobs.assemble_ahead import prepare_ahead, take_prepared

    job_id = seventeen_parts_spoken(rt, tmp_path, "Behind", 10)
    caplog.set_level(logging.INFO)

    assert prepare_ahead(rt, job_id) == 10

    stretches = [r.getMessage() for r in caplog.records if "assembled ahead" in r.getMessage()]
    assert [line.split(" (")[1].split(" of")[0] for line in stretches] == ["1-3", "4-6", "7-9", "10-10"]
    assert [c.audio.index for c in take_prepared(rt, job_id)] == list(range(10))


def test_more_waves_plan_a_book_and_cut_its_preparation_finer(settings_factory, tmp_path: Path,
                                                                caplog) -> None:  # type: ignore[no-untyped-def]
    """TTS_JOBS_WAVES=16: seventeen chapters planned in about sixteen waves (whole chapters), and
    the ten spoken prepared in stretches of two (17 / 16), not three: one measure for both."""
    from jobs.assemble_ahead import prepare_ahead
    from jobs.ingest import ingest_job
    from jobs.plan import plan_pending
    from jobs.runtime import open_runtime
    from jobs.settings import Settings
    from jobs.submit import submit_book

    assert Settings.from_env({"TTS_JOBS_WAVES": "16"}).waves == 16
    rt = open_runtime(settings_factory(waves=16))
    chapters = [(f"Part {n}", [f"Part {n} has one sentence."]) for n in range(1, 18)]
    job_id = submit_book(rt, write_epub(tmp_path / "long.epub", "Finer", chapters),
                         JobOptions(out_dir=tmp_path / "out"))
    assert ingest_job(rt, job_id)
    caplog.set_level(logging.INFO)
    plan_pending(rt)
    [waves] = [int(r.getMessage().split(" in ")[-1].split()[0]) for r in caplog.records
               if "waves of chapters" in r.getMessage()]
    assert 8 < waves <= 16  # whole chapters of about a sixteenth each (the default plans eight)
    speak_chapters(rt, job_id, set(range(10)), 0.3)

    assert prepare_ahead(rt, job_id) == 10

    stretches = [r.getMessage() for r in caplog.records if "assembled ahead" in r.getMessage()]
    assert [line.split(" (")[1].split(" of")[0] for line in stretches] == ["1-2", "3-4", "5-6", "7-8", "9-10"]


def test_the_next_stretch_is_laid_out_while_the_one_before_it_encodes(
        rt: Runtime, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Nine of seventeen chapters spoken: three stretches of three. Each stretch's encodes wait
    (up to 60 s) until the next stretch's laying out (measuring, stitching) has begun: they
    overlap, or this waits in vain; the chapters are prepared all the same, in order."""
    import threading

    from jobs.assemble_ahead import prepare_ahead, take_prepared
    from pipeline.audio.ahead import BookAhead

    laid_out: dict[int, threading.Event] = {first: threading.Event() for first in (0, 3, 6)}
    overlapped: list[bool] = []
    real_lay_out, real_encode = BookAhead.lay_out, BookAhead.encode

    def lay_out(self: BookAhead, chapters, **keep_going):  # type: ignore[no-untyped-def]
        laid_out[self.next_to_lay_out].set()
        return real_lay_out(self, chapters, **keep_going)

    def encode(self: BookAhead, stretch) -> None:  # type: ignore[no-untyped-def]
        following = stretch.first + len(stretch.chapters)
        if following in laid_out:
            overlapped.append(laid_out[following].wait(timeout=60))
        real_encode(self, stretch)

    monkeypatch.setattr(BookAhead, "lay_out", lay_out)
    monkeypatch.setattr(BookAhead, "encode", encode)
    job_id = seventeen_parts_spoken(rt, tmp_path, "Overlap", 9)

    assert prepare_ahead(rt, job_id) == 9

    assert overlapped == [True, True]
    assert [c.audio.index for c in take_prepared(rt, job_id)] == list(range(9))


def test_a_stretch_whose_book_was_spoken_while_it_was_measured_is_not_stitched(
        rt: Runtime, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Nine of seventeen chapters spoken; the book's last sentence is recorded while the second
    stretch is being measured: the first stretch is kept, the second is not stitched (the
    assembly stitches it, and would wait for those stitches only to drop them), and the
    preparation ends there."""
    from sqlalchemy import update

    from jobs.assemble_ahead import prepare_ahead, take_prepared
    from pipeline.audio import ahead
    from storage.models import Job, JobState

    real_measure = ahead.measure_chapter

    def measure_chapter(chapter, *args):  # type: ignore[no-untyped-def]
        if chapter.index == 3:  # the second stretch's first chapter: the speaking ends now
            with rt.session() as session:
                session.execute(update(Job).where(Job.id == job_id).values(state=JobState.ASSEMBLING.value))
                session.commit()
        return real_measure(chapter, *args)

    monkeypatch.setattr(ahead, "measure_chapter", measure_chapter)
    job_id = seventeen_parts_spoken(rt, tmp_path, "Ended", 9)

    assert prepare_ahead(rt, job_id) == 3

    assert [c.audio.index for c in take_prepared(rt, job_id)] == [0, 1, 2]
    stitched = sorted(p.name for p in rt.artifacts.work_dir(job_id).glob("chapter_*.wav"))
    assert stitched == ["chapter_0001.wav", "chapter_0002.wav", "chapter_0003.wav"]


def seventeen_parts_spoken(rt: Runtime, tmp_path: Path, title: str, spoken: int) -> int:
    """A book of seventeen one-sentence chapters, read, its first ``spoken`` chapters spoken."""
    from jobs.ingest import ingest_job
    from jobs.submit import submit_book

    chapters = [(f"Part {n}", [f"Part {n} has one sentence."]) for n in range(1, 18)]
    job_id = submit_book(rt, write_epub(tmp_path / "long.epub", title, chapters), JobOptions(out_dir=tmp_path / "out"))
    assert ingest_job(rt, job_id)
    speak_chapters(rt, job_id, set(range(spoken)), 0.3)
    return job_id


def speak_chapters(rt: Runtime, job_id: int, chapters: set[int], seconds: float) -> None:
    """Write and record every sentence of these chapters (positions) as a tone of ``seconds``."""
    import numpy as np
    from sqlalchemy import select

    from pipeline.audio import write_sentence_wav
    from storage.models import Chapter, Sentence

    tone = (0.3 * np.sin(np.arange(round(seconds * 24000)) / 7.0)).astype(np.float32)
    with rt.session() as session:
        rows = session.execute(select(Sentence, Chapter.index).join(Chapter, Sentence.chapter_id == Chapter.id)
                               .where(Sentence.job_id == job_id)).all()
        spoken = []
        for sentence, chapter_index in rows:
            if chapter_index in chapters:
                relative = rt.artifacts.sentence_audio(job_id, chapter_index, sentence.index)
                write_sentence_wav(rt.artifacts.resolve(str(relative)), tone, durable=False)
                spoken.append(repo.SpokenSentence(sentence.id, str(relative), seconds, 10, False))
        repo.record_spoken_sentences(session, spoken)
        session.commit()

"""A job's options on the embedded path, in process: the real engine (tiny weights, CPU) wrapped to
write down every request it receives, the real job table, real ffmpeg; and how the options travel
with a job through retry and resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mutagen.mp4 import MP4
from sqlalchemy import select

from jobs.choices.lexicons import with_user_lexicon
from jobs.choices.options import JobOptions, recorded_options
from jobs.choices.voices import create_voice, with_voice
from jobs.embedded import plan_run, run_book
from jobs.ingest import ingest_job
from jobs.runtime import Runtime
from jobs.status import job_statuses
from jobs.submit import submit_book
from pipeline.delivery import RefineLevels
from pipeline.types import DIALOGUE, NARRATOR, SynthesisRequest
from storage.models import Chapter, JobMode, Sentence
from tests.books import write_epub
from tests.e2e_helpers import ffprobe_chapters

CHAPTERS = [
    ("Loomings", ["Call me Ishmael. Some years ago I went to sea."]),
    ("The Carpet-Bag", ['"Come," said the landlord, "the harpooneer is a dark complexioned chap."',
                        "I stuffed a shirt or two into my old carpet-bag and started for Cape Horn."]),
    ("The Spouter-Inn", ["“Landlord, where is that harpooneer?” I asked Peter Coffin at the door.",
                         "No answer came from the man, who was counting his money by the fire."]),
]


class RecordingEngine:
    """The real engine, with every request and refine pass it receives written down."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.requests: list[SynthesisRequest] = []
        self.refined: list[tuple[list[str], str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def synthesize(self, requests: Sequence[SynthesisRequest], on_waveform: Any = None) -> Any:
        self.requests += requests
        return self.engine.synthesize(requests, on_waveform)

    def refine_texts(self, texts: Sequence[str], params: Any, seed: int = 0) -> list[str]:
        self.refined.append((list(texts), params.prompt))
        return list(texts)  # the tiny weights' refinement is noise; what matters is what was asked


def _voice(engine: Any, spec: str) -> str:
    return with_voice(engine, SynthesisRequest(text="", voice=spec, seed=0, max_new_tokens=1)).voice


def test_every_option_reaches_the_engine_and_the_audiobook(rt: Runtime, tmp_path: Path, tiny_engine) -> None:  # type: ignore[no-untyped-def]
    """Chapters 2-3 at speed 7, dialogue in a voice of its own, a pronunciation, a refine style and
    a narrator tag: the engine hears exactly that, row by row, and the M4B holds those chapters."""
    create_voice(rt, "anna", seed=7)
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)
    options = JobOptions(formats=("m4b", "epub"), out_dir=tmp_path / "out", chapters=("2-",), speed=7, dialogue_voice="anna",
                         lexicon=(("harpooneer", "harpoon-eer"),), style=RefineLevels(oral=2, pause=4),
                         narrator="Nora Narrator")
    engine = RecordingEngine(tiny_engine)

    job_id = run_book(rt, plan_run(rt, book, options), engine)

    [status] = job_statuses(rt, job_id)
    assert status.state == "done", status.error
    with rt.read_session() as session:
        rows = session.scalars(select(Sentence).join(Chapter).where(Sentence.job_id == job_id)
                               .order_by(Chapter.index, Sentence.index)).all()
        spoken = [(r.chapter.index, r.index, r.role, r.text, r.seed) for r in rows]
    assert {chapter for chapter, *_ in spoken} == {1, 2}  # chapters 2 and 3, their own numbers
    assert {role for _, _, role, _, _ in spoken} == {NARRATOR, DIALOGUE}
    assert any("harpoon eer" in text for *_, text, _ in spoken)
    by_seed = {r.seed: r for r in engine.requests}
    assert len(engine.requests) == len(spoken) == len(by_seed)  # each sentence spoken once
    narrator, dialogue = _voice(tiny_engine, "seed:2222"), _voice(tiny_engine, "seed:7")
    for _, _, role, _, seed in spoken:
        assert by_seed[seed].prompt == "[speed_7]"
        assert by_seed[seed].voice == (dialogue if role == DIALOGUE else narrator)
    # the refine pass runs batch by batch (the book is spoken in waves of chapters), each time in
    # the job's style, and refines every sentence once
    assert engine.refined and {prompt for _, prompt in engine.refined} == {"[oral_2][break_4]"}
    assert sorted(text for texts, _ in engine.refined for text in texts) == sorted(text for *_, text, _ in spoken)

    [m4b] = [Path(p) for p in status.outputs if p.endswith(".m4b")]
    assert [c["tags"]["title"] for c in ffprobe_chapters(m4b)] == ["The Carpet-Bag", "The Spouter-Inn"]
    assert MP4(m4b).tags["©wrt"] == ["Nora Narrator"]
    [epub] = [Path(p) for p in status.outputs if p.endswith(".epub")]  # read-along: the book's words
    timings = json.loads(Path(status.report["timings"]["path"]).read_text())
    assert any(s["written"]["text"] == '"Come,"' and "epub" in s for c in timings["chapters"] for s in c["sentences"])
    heard = [(c["index"], s["index"], s["spoken"]) for c in timings["chapters"] for s in c["sentences"]]
    assert heard == [(chapter, index, text) for chapter, index, _, text, _ in spoken]  # once each, in order
    starts = [s["book_start"] for c in timings["chapters"] for s in c["sentences"]]
    assert starts == sorted(starts)
    assert status.options["speed"] == 7 and status.options["dialogue_voice"] == "anna"
    assert status.options["lexicon"] == {"entries": 1, "files": []}


def test_options_travel_with_the_job_the_lexicon_as_it_was_when_the_job_was_made(
        rt: Runtime, tmp_path: Path) -> None:
    """A retry reads the job's stored options, never the files again; `run` resumes only a job
    with the same options (the same entries, wherever they were read from)."""
    names = tmp_path / "names.txt"
    names.write_text("Ishmael = Ish-may-el\n", encoding="utf-8")
    (rt.settings.data_dir / "lexicon.txt").write_text("# every book\nLoomings = Looming\n", encoding="utf-8")
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)
    options = with_user_lexicon(JobOptions(chapters=("Loomings",), speed=3), rt.settings.data_dir, names)
    assert options.lexicon == (("Loomings", "Looming"), ("Ishmael", "Ish-may-el"))

    job_id = submit_book(rt, book, options, mode=JobMode.EMBEDDED)
    names.unlink()  # gone before the job is read: the job has its entries
    assert ingest_job(rt, job_id)

    with rt.read_session() as session:
        texts = session.scalars(select(Sentence.text).where(Sentence.job_id == job_id)).all()
        recorded = recorded_options(session.get(Sentence, 1).chapter.job)
    assert texts[0] == "Looming" and "Ish may el" in texts[1] and len(texts) == 3
    assert recorded.lexicon == options.lexicon and recorded.lexicon_files == options.lexicon_files
    _interrupt(rt, job_id)
    assert plan_run(rt, book, replace(options, lexicon_files=())).resume_job == job_id  # no --out: the default
    assert recorded.same_run_as(replace(recorded, priority=9, lexicon_files=()))
    for other in (replace(recorded, speed=5), replace(recorded, lexicon=()), replace(recorded, chapters=()),
                  replace(recorded, dialogue_voice="anna"), replace(recorded, narrator="Someone"),
                  replace(recorded, style=RefineLevels(laugh=1))):
        assert not other.same_run_as(recorded)
    assert plan_run(rt, book, replace(options, speed=4)).resume_job is None


def _interrupt(rt: Runtime, job_id: int) -> None:
    from jobs.lifecycle import interrupt_job_in

    with rt.session() as session:
        interrupt_job_in(session, job_id, "stopped by the test")
        session.commit()


def test_a_preview_speaks_the_first_sentences_as_the_job_would(rt: Runtime, tmp_path: Path) -> None:
    """The same requests, row for row, as the job's batches would send: texts, seeds, voices by
    role, pace, limits — and nothing recorded."""
    from jobs.batches.work import SentenceWork
    from jobs.preview import plan_preview
    from storage.models import Job

    create_voice(rt, "anna", seed=7)
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)
    options = JobOptions(chapters=("2-",), speed=3, dialogue_voice="anna", lexicon=(("harpooneer", "harpoon-eer"),))

    plan = plan_preview(rt, book, options, tmp_path / "sample.mp3", chapter=2, sentences=3)
    with rt.read_session() as session:
        assert session.scalars(select(Job)).all() == []
    job_id = submit_book(rt, book, options)
    assert ingest_job(rt, job_id)

    with rt.read_session() as session:
        job = session.get(Job, job_id)
        rows = session.scalars(select(Sentence).join(Chapter).where(Sentence.job_id == job_id, Chapter.index == 1)
                               .order_by(Sentence.index)).all()
        expected = [SentenceWork.from_row(row, job) for row in rows[:3]]
    assert [w.request for w in plan.work] == [w.request for w in expected]
    assert [w.role for w in plan.work] == [NARRATOR, DIALOGUE, NARRATOR]
    assert (plan.chapter, plan.title, plan.paragraphs) == (2, "The Carpet-Bag", [-1, 0, 0])

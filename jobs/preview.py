"""Preview: a few sentences of a book spoken as its job would speak them, in a short file, in
seconds — before hours of GPU time go into the whole book. Nothing is recorded: no job, no
sentence, no audio in the data directory; only the file asked for is written.

The sentences are the first of the chapter asked for (by default the first chapter the job would
read), its announcement first, with every option of the job: the chapters chosen, the voices of
narration and dialogue, the pace, the style of the refine pass, the pronunciations; and each with
the seed it has in the job, so the preview sounds as that stretch of the audiobook will. With a
dialogue voice, the chapter's first quoted speech is added when those sentences hold none.
The same road writes a sample of a new voice (`voice new NAME --sample FILE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.batches.speak import refined
from jobs.batches.work import SentenceWork
from jobs.choices.delivery import Delivery
from jobs.choices.options import PREVIEW_SENTENCES, JobOptions
from jobs.choices.places import check_new_file
from jobs.choices.voices import resolve_voice, with_voice
from jobs.ingest import sentence_seed
from jobs.runtime import Runtime
from jobs.submit import check_options, validate_book
from pipeline.delivery import DEFAULT_SPEED
from pipeline.errors import OptionError, SynthesisError
from pipeline.files import file_sha256
from pipeline.lengths import token_limits
from pipeline.types import DIALOGUE, NARRATOR, Chapter, Sentence, SynthesisResult

if TYPE_CHECKING:
    from pipeline.engine import Engine
    from pipeline.types import Book

VOICE_SAMPLE = ("This is how this voice reads a book aloud, one sentence after another.",
                "这就是这个声音朗读一本书的样子。")


@dataclass(frozen=True)
class PreviewPlan:
    """What a preview speaks, decided before the model loads."""

    path: Path
    chapter: int  # its number, as `inspect` lists it
    title: str
    work: list[SentenceWork]  # in reading order
    paragraphs: list[int]  # each sentence's paragraph (-1: the announcement), for the pauses


@dataclass(frozen=True)
class Preview:
    path: Path
    seconds: float


def plan_preview(rt: Runtime, book: Path, options: JobOptions, path: Path, chapter: int | None = None,
                 sentences: int = PREVIEW_SENTENCES) -> PreviewPlan:
    """Check the book, the options and the file's format, and choose the sentences.

    Raises:
        BookError, OptionError, VoiceError: bad input, before any model loads (InputError: an
        ffmpeg that cannot write the file).
    """
    from pipeline.audio.ffmpeg_check import FfmpegCheck
    from pipeline.audio.preview import preview_format
    from pipeline.text import split_sentences

    check_sample_path(path, "--output")
    if sentences < 1:
        raise OptionError(f"--sentences {sentences}: give 1 or more")
    with FfmpegCheck([preview_format(path)]):  # the file's encode, beside the checks below
        check_options(rt, options)
        read = validate_book(book, options.reading())
    picked = _chapter(read, chapter, options)
    spoken = _opening(split_sentences(picked, options.speaking(read)), sentences)
    with rt.read_session() as session:
        narrator = resolve_voice(session, options.voice)
        dialogue = None
        if options.dialogue_voice is not None:
            dialogue = resolve_voice(session, options.dialogue_voice, "--dialogue-voice")
    delivery = Delivery.of(options, narrator, dialogue)
    sha256 = file_sha256(book)
    seeds = [sentence_seed(sha256, picked.index, s.index) for s in spoken]  # as the job's rows have them
    work = [_work(number, picked.index, s, delivery, seed, options.speed)
            for number, (s, seed) in enumerate(zip(spoken, seeds))]
    return PreviewPlan(path, picked.index + 1, picked.title, work, [s.paragraph_index for s in spoken])


def check_sample_path(path: Path, option: str) -> None:
    """Raises OptionError for a sample file that could not be written at ``path`` (its extension
    names no format, its folder is missing or not writable), before any synthesis is spent on it."""
    from pipeline.audio.preview import preview_format

    preview_format(path)
    check_new_file(path, option)


def speak_preview(plan: PreviewPlan, engine: Engine) -> Preview:
    """Speak the plan's sentences and write them as one file.

    Raises:
        SynthesisError: no sentence could be spoken. AssemblyError: the file cannot be written.
    """
    from pipeline.audio.preview import write_preview
    from pipeline.engine.oom import synthesize_fitting

    work = refined(engine, plan.work)
    outcomes, _ = synthesize_fitting(engine, [with_voice(engine, w.request) for w in work])
    clips = [(o.waveform, paragraph) for o, paragraph in zip(outcomes, plan.paragraphs, strict=True)
             if isinstance(o, SynthesisResult)]
    if not clips:
        raise SynthesisError(f"{plan.path}: no sentence of the preview could be spoken ({outcomes[0]})")
    return Preview(plan.path, write_preview(clips, plan.path))


def voice_sample(rt: Runtime, engine: Engine, voice: str, path: Path) -> Preview:
    """A few sentences in voice ``voice`` (English and Chinese) at ``path``, as a preview is written."""
    check_sample_path(path, "--sample")
    with rt.read_session() as session:
        spec = resolve_voice(session, voice)
    delivery = Delivery.of(JobOptions(voice=voice), spec, None)
    sentences = [Sentence(0, index, 0, text) for index, text in enumerate(VOICE_SAMPLE)]
    work = [_work(s.index, 0, s, delivery, s.index, DEFAULT_SPEED) for s in sentences]
    return speak_preview(PreviewPlan(path, 1, "", work, [0] * len(work)), engine)


def _chapter(book: Book, number: int | None, options: JobOptions) -> Chapter:
    """Chapter ``number`` (as `inspect` lists them) of those the job reads; the first by default."""
    if number is None:
        return book.chapters[0]
    for chapter in book.chapters:
        if chapter.index + 1 == number:
            return chapter
    if options.chapters:
        raise OptionError(f"--chapter {number} is not among --chapters {', '.join(options.chapters)}")
    raise OptionError(f"--chapter {number}: the book has {book.chapters[-1].index + 1} chapters "
                      "(see them with `tts-jobs inspect BOOK`)")


def _opening(sentences: list[Sentence], count: int) -> list[Sentence]:
    """The first ``count`` sentences, and the first quoted speech after them when they hold none."""
    chosen = sentences[:count]
    if any(s.role == DIALOGUE for s in sentences) and all(s.role == NARRATOR for s in chosen):
        chosen.append(next(s for s in sentences if s.role == DIALOGUE))
    return chosen


def _work(number: int, chapter_index: int, sentence: Sentence, delivery: Delivery, seed: int,
          speed: int) -> SentenceWork:
    floor, cap = token_limits(sentence.text, speed)
    return SentenceWork(sentence_id=number, job_id=0, chapter_index=chapter_index, index=sentence.index,
                        request=delivery.request(sentence.text, seed, floor, cap, sentence.role),
                        refine_prompt=delivery.refine, role=sentence.role)

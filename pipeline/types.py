"""Typed, frozen dataclasses that cross stage boundaries.

book file --ingest--> Book(Chapters) --text--> Sentences --batching--> Batches
          --engine--> SynthesisResults --audio--> audiobook files
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 24_000  # ChatTTS (Vocos) output rate, Hz
GPT_STEPS_PER_SECOND = 46.875  # one GPT step -> 2 mel frames of 256 samples at 24 kHz
# Who reads a sentence: the narrator's voice, or (a job with a dialogue voice) quoted speech's
NARRATOR = "narrator"
DIALOGUE = "dialogue"
ROLES = (NARRATOR, DIALOGUE)


@dataclass(frozen=True)
class BookMetadata:
    """What the audiobook is tagged with."""

    title: str
    authors: tuple[str, ...] = ()
    language: str = ""  # BCP-47 such as "en", "zh-CN"; "" when unknown
    publisher: str = ""
    date: str = ""  # as the book states it; the year is its first four digits
    description: str = ""
    cover: bytes | None = field(default=None, repr=False)  # image bytes as stored in the book
    cover_mime: str = ""  # "image/jpeg", "image/png", ...
    subtitle: str = ""
    series: str = ""  # the series the book belongs to ('' when none)
    series_index: str = ""  # its place in the series as the book writes it ("2", "2.5")
    isbn: str = ""  # digits (and a final X) only
    subjects: tuple[str, ...] = ()  # the book's subjects / genres, in its order


@dataclass(frozen=True)
class TextPlace:
    """A stretch of an EPUB content document's text, as the reader extracts it (``pipeline.ingest.xhtml``)."""

    document: str  # the content document's path in the EPUB
    block: int  # which of its blocks: numbered in reading order from 0, the blocks of its notes included
    start: int = 0  # character offsets in that block's text
    end: int | None = None  # None: to the block's end


@dataclass(frozen=True)
class ParagraphSource:
    """Where a paragraph (or heading) comes from: its text from ``prefix`` on is ``place``'s text."""

    place: TextPlace
    prefix: int = 0  # leading characters that the reader put before the book's words ('Note 1. ')


@dataclass(frozen=True)
class ChapterSource:
    """Where a chapter's words stand in the book file (EPUB inputs), for a read-along edition."""

    paragraphs: tuple[ParagraphSource | None, ...]  # one per paragraph; None: words the reader supplies
    heading: str = ""  # the heading its title is announced from, as the book writes it ('' when none)
    heading_source: ParagraphSource | None = None


@dataclass(frozen=True)
class Chapter:
    """One chapter as the author laid it out: a title and its paragraphs of plain text."""

    index: int  # 0-based position in reading order
    title: str
    paragraphs: tuple[str, ...]  # paragraph boundaries become longer pauses
    source: ChapterSource | None = None  # None: the format has no places to point at (TXT, Markdown, HTML)

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class Book:
    """A parsed book: metadata, chapters in reading order, and reader warnings."""

    source: str  # the path it was read from
    format: str  # "epub", "txt", "md", "html"
    metadata: BookMetadata
    chapters: tuple[Chapter, ...]
    warnings: tuple[str, ...] = ()
    # the book's own pronunciations (EPUB 3 PLS aliases): (written, spoken), applied before the reader's
    lexicon: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class WrittenSpan:
    """A spoken sentence as the book writes it ('1998', where the voice says 'nineteen ninety-eight')."""

    text: str
    start: int  # offsets of ``text`` in its paragraph (for the title: in the chapter's written title)
    end: int
    place: TextPlace | None = None  # where ``text`` stands in the book file (EPUB inputs)


@dataclass(frozen=True)
class Sentence:
    """One speakable unit. ``text`` is already normalised for ChatTTS."""

    chapter_index: int
    index: int  # 0-based position within the chapter
    paragraph_index: int  # which paragraph of the chapter it came from
    text: str
    written: WrittenSpan | None = None  # found on request (TextOptions.written); None: the reader's own words
    role: str = NARRATOR  # DIALOGUE: inside a quotation, where the job has a dialogue voice


@dataclass(frozen=True)
class PlannedSentence:
    """What the batch planner needs to know about a pending sentence."""

    id: int  # opaque to the planner (the database id)
    max_new_tokens: int  # the GPT step budget of this sentence
    prompt_tokens: int  # the length of its tokenised prompt (approximate is fine)
    priority: int = 0  # higher goes first


@dataclass(frozen=True)
class Batch:
    """A group of sentences synthesised together. ``sentence_ids`` keep the planner's order."""

    sentence_ids: tuple[int, ...]
    estimated_bytes: int  # the planner's estimate of the batch's peak memory
    longest_positions: int = 0  # its longest sentence's prompt + new tokens
    priority: int = 0  # its sentences' priority class


@dataclass(frozen=True)
class SynthesisRequest:
    """One sentence to speak."""

    text: str
    voice: str  # a ChatTTS speaker embedding, as the compact string upstream uses
    seed: int  # per-sentence sampling seed, so a retried sentence sounds the same
    max_new_tokens: int  # hard cap on GPT steps (46.875 steps = 1 s of audio)
    min_new_tokens: int = 0  # EOS is masked before this many steps
    prompt: str = "[speed_5]"  # upstream's code prompt (speed, laughter, ...)
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05


@dataclass(frozen=True)
class SynthesisResult:
    """The audio of one request."""

    waveform: np.ndarray = field(repr=False)  # float32 mono, 24 kHz, shape [n_samples]
    gpt_steps: int  # audio tokens generated (EOS excluded)
    hit_limit: bool  # True when it stopped at max_new_tokens instead of choosing EOS

    @property
    def seconds(self) -> float:
        return len(self.waveform) / SAMPLE_RATE

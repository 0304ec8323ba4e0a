"""What crosses between claiming a batch, speaking it and recording it.

``claim.py`` turns a batch's pending sentence rows into ``SentenceWork`` (a ``ClaimedBatch``);
``speak.py`` and ``batch_stream.py`` turn each into a ``SentenceOutcome`` (its WAV written, or why
it has none); ``record.py`` records the outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.types import SynthesisRequest

if TYPE_CHECKING:
    from storage.models import Job, Sentence


@dataclass(frozen=True)
class SentenceWork:
    """One sentence to speak, and where its audio belongs."""

    sentence_id: int
    job_id: int
    chapter_index: int
    index: int
    request: SynthesisRequest
    refine: bool = False  # the job asked for upstream's refine pass (pauses, breaths)

    @classmethod
    def from_row(cls, s: Sentence, job: Job) -> SentenceWork:
        return cls(sentence_id=s.id, job_id=s.job_id, chapter_index=s.chapter.index, index=s.index,
                   request=SynthesisRequest(text=s.text, voice=job.voice_embedding, seed=s.seed,
                                            max_new_tokens=s.max_new_tokens,
                                            min_new_tokens=s.min_new_tokens),
                   refine=bool((job.options or {}).get("refine")))


@dataclass(frozen=True)
class ClaimedBatch:
    """A batch this worker holds the lease of, and the sentences it has left to speak."""

    batch_id: int
    attempts: int  # this one included: the errors it raised before, plus one
    work: list[SentenceWork]
    suspect: bool = False  # a worker holding it died: it runs alone, never in a stream

    @property
    def refines(self) -> bool:
        return any(w.refine for w in self.work)


@dataclass(frozen=True)
class SentenceOutcome:
    """A spoken sentence: its WAV written (path relative to the artifact root, its length), or
    the error that left it without audio (it then fails, and its job with it)."""

    work: SentenceWork
    audio_path: str | None = None
    seconds: float = 0.0
    gpt_steps: int = 0
    hit_limit: bool = False  # it stopped at max_new_tokens instead of choosing to end
    error: str | None = None

    @property
    def spoken(self) -> bool:
        return self.audio_path is not None

"""What crosses between claiming a batch, speaking it and recording it.

``claim.py`` turns a batch's pending sentence rows into ``SentenceWork`` (a ``ClaimedBatch``);
``speak.py`` and ``batch_stream.py`` turn each into a ``SentenceOutcome`` (its WAV written, or why
it has none); ``record.py`` records the outcomes.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.choices.delivery import Delivery
from jobs.choices.voices import SEED_VOICE_PREFIX
from pipeline.types import NARRATOR, SynthesisRequest

if TYPE_CHECKING:
    from storage.models import Job, Sentence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentenceWork:
    """One sentence to speak, and where its audio belongs."""

    sentence_id: int
    job_id: int
    chapter_index: int
    index: int
    request: SynthesisRequest
    refine_prompt: str | None = None  # the job's refine pass (its style levels); None: the text as written
    role: str = NARRATOR

    @property
    def refine(self) -> bool:
        return self.refine_prompt is not None

    @classmethod
    def from_row(cls, s: Sentence, job: Job, delivery: Delivery | None = None) -> SentenceWork:
        """The work of sentence row ``s`` of ``job``, spoken as the job's ``delivery`` says (the
        voice of the sentence's role, the job's pace and style)."""
        delivery = delivery or Delivery.of_job(job)
        return cls(sentence_id=s.id, job_id=s.job_id, chapter_index=s.chapter.index, index=s.index,
                   request=delivery.request(s.text, s.seed, s.min_new_tokens, s.max_new_tokens, s.role),
                   refine_prompt=delivery.refine, role=s.role)


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


def log_requests(batch_id: int, work: Sequence[SentenceWork]) -> None:
    """At DEBUG, each sentence's request as it goes to the engine: its role, voice, prompt, refine
    style and limits (`grep 'batch=12: sentence='` shows who read what)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    for w in work:
        r = w.request
        log.debug("batch=%s: sentence=%s role=%s voice=%s prompt=%s refine=%s tokens=%s-%s", batch_id,
                  w.sentence_id, w.role, voice_label(r.voice), r.prompt, w.refine_prompt, r.min_new_tokens,
                  r.max_new_tokens)


def voice_label(spec: str) -> str:
    """A voice spec short enough for a log line: ``seed:N`` as it is, an embedding by its checksum."""
    if spec.startswith(SEED_VOICE_PREFIX):
        return spec
    return f"embedding:{zlib.crc32(spec.encode()):08x}"

"""How a job's sentences are spoken: the voice of each role, the pace in every row's prompt, and
the refine pass's style — one place that turns a sentence into the request the engine receives,
for the job's batches and for a preview alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.choices.options import JobOptions, recorded_options
from pipeline.delivery import code_prompt
from pipeline.types import DIALOGUE, SynthesisRequest

if TYPE_CHECKING:
    from storage.models import Job

DIALOGUE_VOICE_KEY = "dialogue_voice_embedding"  # in a job's options: the dialogue voice, frozen at submit


@dataclass(frozen=True)
class Delivery:
    """The voice specs of a job's narrator and (None: no) dialogue, its code prompt, and its refine
    pass's prompt (None: no refine pass; '': the model's own levels)."""

    narrator: str
    dialogue: str | None
    prompt: str
    refine: str | None

    @classmethod
    def of(cls, options: JobOptions, narrator: str, dialogue: str | None) -> Delivery:
        return cls(narrator, dialogue if options.dialogue_voice else None, code_prompt(options.speed),
                   options.style.prompt() if options.refine else None)

    @classmethod
    def of_job(cls, job: Job) -> Delivery:
        return cls.of(recorded_options(job), job.voice_embedding, (job.options or {}).get(DIALOGUE_VOICE_KEY))

    def request(self, text: str, seed: int, min_new_tokens: int, max_new_tokens: int, role: str
                ) -> SynthesisRequest:
        """One sentence's request: quoted speech in the dialogue voice, the rest in the narrator's."""
        voice = self.dialogue if role == DIALOGUE and self.dialogue else self.narrator
        return SynthesisRequest(text=text, voice=voice, seed=seed, max_new_tokens=max_new_tokens,
                                min_new_tokens=min_new_tokens, prompt=self.prompt)

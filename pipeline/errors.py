"""The project's one exception hierarchy.

Every message a user sees names the file (or item), the problem and the fix.
"""

from __future__ import annotations


class TtsJobsError(Exception):
    """Base class of every error tts-jobs raises on purpose."""


class BookError(TtsJobsError):
    """A book cannot be read: missing, unsupported, corrupt, hostile or empty.

    Bad input is final: a job that fails with a BookError is never retried automatically.
    """

    def __init__(self, path: object, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        message = f"{self.path}: {problem}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)


class ModelError(TtsJobsError):
    """The voice model cannot be loaded (missing or corrupt weights, offline download...)."""


class InputError(TtsJobsError):
    """Something the user gave, other than a book, cannot be used: an option's value, a job id, a
    voice. Like a bad book, it is reported before any model loads or any job is recorded."""


class OptionError(InputError):
    """An option's value is not one tts-jobs knows (a format, a chapter range...)."""


class NoSuchJob(InputError):
    """A job id that is not in the job table."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id}: see `tts-jobs status` for the list")


class VoiceError(InputError):
    """An unknown or unreadable voice."""


class BrokerUnreachable(TtsJobsError):
    """The Celery broker does not answer; nothing that needs it was recorded."""


class SynthesisError(TtsJobsError):
    """Synthesis failed for reasons other than the input (model bug, device error)."""


class OutOfDeviceMemory(SynthesisError):
    """The device ran out of memory for a batch; ``pipeline/engine/oom.py`` halves and retries it."""


class SentenceTooLargeError(SynthesisError):
    """A single sentence does not fit in the device's memory even alone."""


class AssemblyError(TtsJobsError):
    """The finished audio could not be assembled or encoded."""

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


class VoiceError(TtsJobsError):
    """An unknown or unreadable voice."""


class SynthesisError(TtsJobsError):
    """Synthesis failed for reasons other than the input (model bug, device error)."""


class OutOfDeviceMemory(SynthesisError):
    """The device ran out of memory for a batch; ``pipeline/engine/oom.py`` halves and retries it."""


class SentenceTooLargeError(SynthesisError):
    """A single sentence does not fit in the device's memory even alone."""


class AssemblyError(TtsJobsError):
    """The finished audio could not be assembled or encoded."""

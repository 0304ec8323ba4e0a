"""Named voices: the catalogue users choose from, and the speaker a voice name gives the engine.

A voice is stored either as a speaker embedding (made from a recording) or as a seed; a job
records the voice's spec (``resolve_voice``), and synthesis turns a seed spec into the speaker the
engine samples for that seed (``with_voice``), so a seed voice sounds the same on every worker.
"""

from __future__ import annotations

import re
import secrets
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import VoiceError

if TYPE_CHECKING:  # the database and the engine are imported where a voice is looked up or made:
    # a CLI command that checks a voice name before anything else stays light
    from sqlalchemy.orm import Session

    from jobs.runtime import Runtime
    from pipeline.engine import Engine
    from pipeline.types import SynthesisRequest

DEFAULT_VOICE = "default"
DEFAULT_VOICE_SEED = 2222  # a voice every installation has without asking
SEED_VOICE_PREFIX = "seed:"  # a voice stored as its seed; the worker derives the embedding


@dataclass(frozen=True)
class VoiceEntry:
    name: str
    source: str  # "seed N", a recording's path, or "seed N (built in)"


def builtin_voice() -> VoiceEntry:
    return VoiceEntry(DEFAULT_VOICE, f"seed {DEFAULT_VOICE_SEED} (built in)")


def list_voices(rt: Runtime) -> list[VoiceEntry]:
    """The voices books can be read with, the built-in one first."""
    from storage import repo

    with rt.read_session() as session:
        stored = [VoiceEntry(v.name, v.source) for v in repo.list_voices(session)]
    return [builtin_voice(), *stored]


def create_voice(rt: Runtime, name: str, seed: int | None = None, from_audio: Path | None = None,
                 engine: Engine | None = None) -> VoiceEntry:
    """Record a named voice from a seed (default: a random one) or a reference recording (which
    ``engine`` encodes; loaded here when not given). Raises VoiceError for a name that cannot be
    taken and a recording that cannot be read, before any engine loads."""
    from jobs.runtime import open_engine
    from storage import repo

    check_new_voice(rt, name, from_audio)
    embedding = ""
    if from_audio is not None:
        embedding, source = (engine or open_engine(rt.settings)).voice_from_audio(from_audio), str(from_audio)
    else:
        seed = seed if seed is not None else secrets.randbelow(2**31)
        source = f"seed {seed}"
    with rt.session() as session:
        repo.add_voice(session, name, embedding, seed, source)
        session.commit()
    return VoiceEntry(name, source)


# Letters (any script), digits, and '.', '_', '-', "'" or single spaces inside: a name a shell,
# a file name and `--voice NAME` all carry as it is.
_VOICE_NAME = re.compile(r"[^\W_](?:[\w.'-]| (?! ))*")
_NAME_LENGTH = 64


def check_new_voice(rt: Runtime, name: str, from_audio: Path | None = None) -> None:
    """Raises VoiceError for a name no voice can have or one that is taken, and for a recording
    that cannot be read (it is read again when encoded; it is short)."""
    from storage import repo

    example = "e.g. `tts-jobs voice new narrator --seed 42`"
    if not name.strip():
        raise VoiceError(f"voice name {name!r} is empty: give the voice a name, {example}")
    if not _VOICE_NAME.fullmatch(name) or name.endswith(" ") or len(name) > _NAME_LENGTH:
        raise VoiceError(f"voice name {name!r}: use letters, digits, '.', '_', '-' or single spaces inside, "
                         f"at most {_NAME_LENGTH} characters, {example}")
    with rt.read_session() as session:
        taken = name == DEFAULT_VOICE or repo.get_voice(session, name) is not None
    if taken:
        raise VoiceError(f"voice {name!r} exists already: pick another name (`tts-jobs voice list` "
                         "shows the names taken)")
    if from_audio is not None:
        from pipeline.engine.audio_io import read_reference_audio

        read_reference_audio(from_audio)


def resolve_voice(session: Session, name: str, option: str = "--voice") -> str:
    """The voice spec a job is read with: a stored embedding, or ``seed:N`` for seed voices.

    Raises VoiceError naming ``option``, the voices that exist and how to make this one."""
    from storage import repo

    voice = repo.get_voice(session, name)
    if voice is not None:
        return voice.embedding if voice.embedding else f"{SEED_VOICE_PREFIX}{voice.seed}"
    if name == DEFAULT_VOICE:
        return f"{SEED_VOICE_PREFIX}{DEFAULT_VOICE_SEED}"
    known = ", ".join([DEFAULT_VOICE] + [v.name for v in repo.list_voices(session)])
    raise VoiceError(f"unknown voice {name!r} ({option}): use one of {known}, or create it with "
                     f"`tts-jobs voice new {name}`")


def check_voice_names(rt: Runtime | None, voice: str, dialogue_voice: str | None = None) -> None:
    """Raises VoiceError for a --voice or --dialogue-voice no job could be read with; ``rt`` None
    (no database yet) knows the built-in voice alone."""
    named = [("--voice", voice)] + ([("--dialogue-voice", dialogue_voice)] if dialogue_voice else [])
    if rt is not None:
        with rt.read_session() as session:
            for option, name in named:
                resolve_voice(session, name, option)
    for option, name in named if rt is None else ():
        if name != DEFAULT_VOICE:
            raise VoiceError(f"unknown voice {name!r} ({option}): use {DEFAULT_VOICE}, or create it with "
                             f"`tts-jobs voice new {name}`")


_seed_speakers: dict[str, str] = {}
_seed_speakers_lock = threading.Lock()


def with_voice(engine: Engine, request: SynthesisRequest) -> SynthesisRequest:
    """Turn ``seed:N`` voices into the speaker embedding the engine samples for that seed."""
    if not request.voice.startswith(SEED_VOICE_PREFIX):
        return request
    with _seed_speakers_lock:
        if request.voice not in _seed_speakers:
            seed = int(request.voice[len(SEED_VOICE_PREFIX):])
            _seed_speakers[request.voice] = engine.sample_voice(seed)
        return replace(request, voice=_seed_speakers[request.voice])

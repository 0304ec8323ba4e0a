"""What a user chooses per book (`run`, `submit`, `bulk`), parsed and checked in one place."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.voices import DEFAULT_VOICE
from pipeline.audio.assembly_types import SUPPORTED_FORMATS
from pipeline.errors import TtsJobsError

FORMATS = SUPPORTED_FORMATS  # the one list of output formats, owned by the assembly stage
DEFAULT_FORMATS = ("m4b",)


@dataclass(frozen=True)
class JobOptions:
    """What a user chooses per book on `submit` / `run`."""

    formats: tuple[str, ...] = DEFAULT_FORMATS
    out_dir: Path | None = None
    voice: str = DEFAULT_VOICE
    priority: int = 0
    refine: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"formats": list(self.formats), "out_dir": str(self.out_dir) if self.out_dir else None,
                "refine": self.refine}


def parse_formats(values: Iterable[str] | None) -> tuple[str, ...]:
    """``-f mp3 -f ogg`` or ``-f mp3,ogg`` as a tuple of lower-case names (default: M4B)."""
    parsed = tuple(f.strip().lower() for v in values or () for f in v.split(",") if f.strip())
    return parsed or DEFAULT_FORMATS


def check_formats(formats: Iterable[str]) -> None:
    """Raises TtsJobsError naming the formats that do not exist and the ones that do."""
    formats = tuple(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise TtsJobsError(f"unknown output format {', '.join(bad) or '(none)'}: use {', '.join(FORMATS)}")

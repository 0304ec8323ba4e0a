"""What a user chooses per book (`run`, `submit`, `bulk`, `inspect`), parsed and checked in one
place, and stored with the job so that a retried or resumed job keeps every choice."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.voices import DEFAULT_VOICE
from pipeline.audio.assembly_types import SUPPORTED_FORMATS
from pipeline.errors import OptionError
if TYPE_CHECKING:
    from pipeline.ingest.options import IngestOptions
    from storage.models import Job

FORMATS = SUPPORTED_FORMATS  # the one list of output formats, owned by the assembly stage
DEFAULT_FORMATS = ("m4b",)


@dataclass(frozen=True)
class JobOptions:
    """What a user chooses per book. ``out_dir`` is the library folder (each book gets
    ``<Author>/<Title>/`` in it); the reading options say what of the book is read."""

    formats: tuple[str, ...] = DEFAULT_FORMATS
    out_dir: Path | None = None
    voice: str = DEFAULT_VOICE
    priority: int = 0
    refine: bool = False
    notes: str = "end"  # footnotes and endnotes: the book's "end", their "chapter", or "skip"
    keep_front_matter: bool = False
    max_book_mb: int | None = None  # None: the reader's own limits
    fail_on_unsupported_script: bool = False

    def reading(self) -> IngestOptions:
        """The ingestion stage's options for these choices."""
        from pipeline.ingest.options import IngestOptions  # the ingest package loads every reader

        choices: dict[str, Any] = {"notes": self.notes, "keep_front_matter": self.keep_front_matter,
                                   "fail_on_unsupported_script": self.fail_on_unsupported_script}
        if self.max_book_mb is not None:
            return IngestOptions.with_size_limit(self.max_book_mb, **choices)
        return IngestOptions(**choices)

    def to_json(self) -> dict[str, Any]:
        return {"formats": list(self.formats), "out_dir": str(self.out_dir) if self.out_dir else None,
                "voice": self.voice, "priority": self.priority, "refine": self.refine, "notes": self.notes,
                "keep_front_matter": self.keep_front_matter, "max_book_mb": self.max_book_mb,
                "fail_on_unsupported_script": self.fail_on_unsupported_script}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobOptions:
        """The options a job was recorded with (a job's ``out_dir`` is its book folder; the
        library folder it was given is ``out_root``)."""
        out = data.get("out_root") or data.get("out_dir")
        return cls(formats=tuple(data.get("formats") or DEFAULT_FORMATS), out_dir=Path(out) if out else None,
                   voice=data.get("voice") or DEFAULT_VOICE, priority=int(data.get("priority") or 0),
                   refine=bool(data.get("refine")), notes=data.get("notes") or "end",
                   keep_front_matter=bool(data.get("keep_front_matter")), max_book_mb=data.get("max_book_mb"),
                   fail_on_unsupported_script=bool(data.get("fail_on_unsupported_script")))

    def same_run_as(self, other: JobOptions) -> bool:
        """Whether a job with ``other`` options makes the same audiobook (priority aside)."""
        return {**self.to_json(), "priority": 0} == {**other.to_json(), "priority": 0}


def recorded_options(job: Job) -> JobOptions:
    """The options job ``job`` was recorded with (its voice and priority have columns of their own)."""
    return replace(JobOptions.from_json(job.options or {}), voice=job.voice_name, priority=job.priority)


def parse_formats(values: Iterable[str] | None) -> tuple[str, ...]:
    """``-f mp3 -f ogg`` or ``-f mp3,ogg`` as a tuple of lower-case names (default: M4B)."""
    parsed = tuple(f.strip().lower() for v in values or () for f in v.split(",") if f.strip())
    return parsed or DEFAULT_FORMATS


def check_choices(options: JobOptions) -> None:
    """Raises OptionError naming an option's value that does not exist, and the ones that do."""
    from pipeline.ingest.options import NOTES_PLACES

    bad = [f for f in options.formats if f not in FORMATS]
    if bad or not options.formats:
        raise OptionError(f"unknown output format {', '.join(bad) or '(none)'}: use {', '.join(FORMATS)}")
    if options.notes not in NOTES_PLACES:
        raise OptionError(f"unknown --notes {options.notes}: use {', '.join(NOTES_PLACES)}")
    if options.max_book_mb is not None and options.max_book_mb <= 0:
        raise OptionError(f"--max-book-mb {options.max_book_mb}: give a positive number of megabytes")

"""What a user chooses per book (`run`, `submit`, `bulk`, `inspect`), parsed and checked in one
place, and stored with the job so that a retried or resumed job keeps every choice."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.choices.places import check_out_folder
from jobs.choices.voices import DEFAULT_VOICE
from pipeline.audio.assembly_types import SUPPORTED_FORMATS
from pipeline.delivery import DEFAULT_SPEED, RefineLevels, check_speed
from pipeline.errors import OptionError

if TYPE_CHECKING:
    from pipeline.ingest.options import IngestOptions
    from pipeline.text import TextOptions
    from pipeline.text.lexicon import Entry
    from pipeline.types import Book
    from storage.models import Job

FORMATS = SUPPORTED_FORMATS  # the one list of output formats, owned by the assembly stage
DEFAULT_FORMATS = ("m4b",)
PREVIEW_SENTENCES = 5  # a preview speaks this many of its chapter's first sentences unless told
BULK_MIN_AGE_SECONDS = 60.0  # bulk leaves a file changed more recently (still being copied) for later


@dataclass(frozen=True)
class JobOptions:
    """What a user chooses per book. ``out_dir`` is the library folder (each book gets
    ``<Author>/<Title>/`` in it); the reading options say what of the book is read, the speaking
    options how: voices, pace, style, pronunciations."""

    formats: tuple[str, ...] = DEFAULT_FORMATS
    out_dir: Path | None = None
    voice: str = DEFAULT_VOICE
    priority: int = 0
    refine: bool = False  # upstream's refine pass; any style level turns it on
    notes: str = "end"  # footnotes and endnotes: the book's "end", their "chapter", or "skip"
    keep_front_matter: bool = False
    code: str = "announce"  # code listings: "announce" (and skip), "skip", or "read"
    max_book_mb: int | None = None  # None: the reader's own limits
    fail_on_unsupported_script: bool = False
    chapters: tuple[str, ...] = ()  # numbers, ranges or titles (pipeline/ingest/selection.py); () for all
    speed: int = DEFAULT_SPEED
    style: RefineLevels = RefineLevels()
    lexicon: tuple[Entry, ...] = ()  # the user's pronunciations, as they were when the job was made
    lexicon_files: tuple[str, ...] = ()  # where they came from (shown, not compared)
    dialogue_voice: str | None = None  # quoted speech's voice; None: the narrator reads everything
    narrator: str | None = None  # the narrator tag; None: a description of the voices
    language: str = ""  # the book's language (BCP-47, --language); "": the book's own, or its text's

    def __post_init__(self) -> None:
        if self.style.chosen and not self.refine:
            object.__setattr__(self, "refine", True)

    def reading(self) -> IngestOptions:
        """The ingestion stage's options for these choices."""
        from pipeline.ingest.options import IngestOptions  # the ingest package loads every reader

        choices: dict[str, Any] = {"notes": self.notes, "keep_front_matter": self.keep_front_matter,
                                   "code": self.code,
                                   "fail_on_unsupported_script": self.fail_on_unsupported_script,
                                   "chapters": self.chapters, "language": self.language}
        if self.max_book_mb is not None:
            return IngestOptions.with_size_limit(self.max_book_mb, **choices)
        return IngestOptions(**choices)

    def speaking(self, book: Book) -> TextOptions:
        """The text stage's options for ``book``: its own pronunciations, then the user's; its
        quotations cut out for the dialogue voice, by its language's marks."""
        from pipeline.text import TextOptions
        from pipeline.text.lexicon import Lexicon

        return TextOptions(lexicon=Lexicon.merged(book.lexicon, self.lexicon),
                           dialogue=self.dialogue_voice is not None, book_language=book.metadata.language)

    def narrator_tag(self) -> str:
        """What players show as the narrator: ``--narrator``, else the voices that read the book."""
        if self.narrator:
            return self.narrator
        if self.dialogue_voice:
            return f'ChatTTS voices "{self.voice}" (narration) and "{self.dialogue_voice}" (dialogue)'
        return f'ChatTTS voice "{self.voice}"'

    def to_json(self) -> dict[str, Any]:
        return {"formats": list(self.formats), "out_dir": str(self.out_dir) if self.out_dir else None,
                "voice": self.voice, "priority": self.priority, "refine": self.refine, "notes": self.notes,
                "keep_front_matter": self.keep_front_matter, "max_book_mb": self.max_book_mb,
                "code": self.code, "fail_on_unsupported_script": self.fail_on_unsupported_script,
                "chapters": list(self.chapters), "speed": self.speed,
                "style": {k: v for k, v in asdict(self.style).items() if v is not None},
                "lexicon": [list(entry) for entry in self.lexicon], "lexicon_files": list(self.lexicon_files),
                "dialogue_voice": self.dialogue_voice, "narrator": self.narrator, "language": self.language}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobOptions:
        """The options a job was recorded with (a job's ``out_dir`` is its book folder; the
        library folder it was given is ``out_root``); a job recorded before an option existed
        gets that option's default."""
        out = data.get("out_root") or data.get("out_dir")
        return cls(formats=tuple(data.get("formats") or DEFAULT_FORMATS), out_dir=Path(out) if out else None,
                   voice=data.get("voice") or DEFAULT_VOICE, priority=int(data.get("priority") or 0),
                   refine=bool(data.get("refine")), notes=data.get("notes") or "end",
                   keep_front_matter=bool(data.get("keep_front_matter")), max_book_mb=data.get("max_book_mb"),
                   code=data.get("code") or "announce",
                   fail_on_unsupported_script=bool(data.get("fail_on_unsupported_script")),
                   chapters=tuple(data.get("chapters") or ()), speed=int(data.get("speed") or DEFAULT_SPEED),
                   style=RefineLevels(**(data.get("style") or {})),
                   lexicon=tuple((w, s) for w, s in data.get("lexicon") or ()),
                   lexicon_files=tuple(data.get("lexicon_files") or ()),
                   dialogue_voice=data.get("dialogue_voice"), narrator=data.get("narrator"),
                   language=data.get("language") or "")

    def same_run_as(self, other: JobOptions) -> bool:
        """Whether a job with ``other`` options makes the same audiobook (priority aside, and where
        the pronunciations were read from: the same entries make the same book)."""
        return _compared(self) == _compared(other)

    def run_key(self) -> str:
        """A short name of the audiobook these options make: equal for options ``same_run_as``."""
        return hashlib.sha256(json.dumps(_compared(self), sort_keys=True, default=str).encode()).hexdigest()[:16]

    def shown(self) -> dict[str, Any]:
        """The choices as `status` shows them: the lexicon by its size and files, the narrator tag
        as it is written."""
        shown = {key: value for key, value in self.to_json().items()
                 if key not in ("out_dir", "lexicon_files")}
        shown["lexicon"] = {"entries": len(self.lexicon), "files": list(self.lexicon_files)}
        shown["narrator"] = self.narrator_tag()
        return shown


def _compared(options: JobOptions) -> dict[str, Any]:
    return {**options.to_json(), "priority": 0, "lexicon_files": []}


def recorded_options(job: Job) -> JobOptions:
    """The options job ``job`` was recorded with (its voice and priority have columns of their own)."""
    return replace(JobOptions.from_json(job.options or {}), voice=job.voice_name, priority=job.priority)


def parse_formats(values: Iterable[str] | None) -> tuple[str, ...]:
    """``-f mp3 -f ogg`` or ``-f mp3,ogg`` as a tuple of lower-case names (default: M4B)."""
    parsed = tuple(f.strip().lower() for v in values or () for f in v.split(",") if f.strip())
    return parsed or DEFAULT_FORMATS


def check_choices(options: JobOptions) -> None:
    """Raises OptionError naming an option's value that does not exist, and the ones that do, or
    an `--out` folder that cannot be written."""
    from pipeline.ingest.language import check_language_tag
    from pipeline.ingest.options import CODE_MODES, NOTES_PLACES
    from pipeline.ingest.selection import check_selection

    bad = [f for f in options.formats if f not in FORMATS]
    if bad or not options.formats:
        raise OptionError(f"unknown output format {', '.join(bad) or '(none)'}: use {', '.join(FORMATS)}")
    if options.notes not in NOTES_PLACES:
        raise OptionError(f"unknown --notes {options.notes}: use {', '.join(NOTES_PLACES)}")
    if options.code not in CODE_MODES:
        raise OptionError(f"unknown --code {options.code}: use {', '.join(CODE_MODES)}")
    if options.max_book_mb is not None and options.max_book_mb <= 0:
        raise OptionError(f"--max-book-mb {options.max_book_mb}: give a positive number of megabytes")
    check_speed(options.speed)
    if options.language:
        try:
            check_language_tag(options.language)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    check_selection(options.chapters)
    if options.out_dir is not None:
        check_out_folder(options.out_dir)
    if options.dialogue_voice == options.voice:
        raise OptionError(f"--dialogue-voice {options.dialogue_voice} is the narrator's voice too: give "
                          "another voice (`tts-jobs voice list`), or leave the option out")

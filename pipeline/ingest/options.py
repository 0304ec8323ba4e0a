"""Options of the ingestion stage."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024
NOTES_PLACES = ("end", "chapter", "skip")  # where notes are read: the book's end, their chapter's, nowhere
CODE_MODES = ("announce", "skip", "read")  # what a code listing becomes (``listings``)


@dataclass(frozen=True)
class IngestOptions:
    """How a book file is read.

    The defaults suit a nightly bulk run: front matter left out, notes read at the end of the book,
    hostile archives refused early. The size limits bound time and memory for any input, however it
    was crafted; ``with_size_limit`` sets the byte limits from one figure (the ``--max-book-mb`` option).
    """

    include_nonlinear: bool = False  # EPUB spine items marked linear="no" (pop-up notes, answer keys)
    keep_front_matter: bool = False  # cover, title page, copyright, contents, index, colophon
    image_alt_text: bool = False  # read an image's alt text where the image sits
    notes: str = "end"  # footnotes and endnotes: "end" of the book, end of their "chapter", or "skip"
    fail_on_unsupported_script: bool = False  # BookError instead of a warning for e.g. Cyrillic or kana
    code: str = "announce"  # code listings: "announce" (and skip), "skip" silently, or "read" as text
    chapters: tuple[str, ...] = ()  # the chapters read, by number or title (``selection``); () for all
    language: str = ""  # the book's language as the user gives it (BCP-47); "" for the book's own or its text's
    max_file_bytes: int = 1024 * MiB  # the book file itself
    max_uncompressed_bytes: int = 512 * MiB  # all EPUB members read, counted as they decompress
    max_member_bytes: int = 128 * MiB  # one EPUB member
    max_compression_ratio: int = 200  # uncompressed / compressed, per member (bombs reach 1000+)
    max_entries: int = 20_000  # members in one EPUB

    def __post_init__(self) -> None:
        limits = (
            "max_file_bytes",
            "max_uncompressed_bytes",
            "max_member_bytes",
            "max_compression_ratio",
            "max_entries",
        )
        for name in limits:
            if getattr(self, name) <= 0:
                raise ValueError(f"IngestOptions.{name} must be positive")
        if self.notes not in NOTES_PLACES:
            raise ValueError(f"notes must be one of {', '.join(NOTES_PLACES)}, not {self.notes!r}")
        if self.code not in CODE_MODES:
            raise ValueError(f"code must be one of {', '.join(CODE_MODES)}, not {self.code!r}")

    @classmethod
    def with_size_limit(cls, megabytes: int, **options: object) -> IngestOptions:
        """Options whose byte limits follow one figure: the book file and all it decompresses to may
        each be ``megabytes`` MiB, and one member of an EPUB a quarter of that, but at least 128 MiB
        (all of it, when that is less)."""
        if megabytes <= 0:
            raise ValueError("the size limit must be a positive number of megabytes")
        size = megabytes * MiB
        return cls(
            max_file_bytes=size,
            max_uncompressed_bytes=size,
            max_member_bytes=max(size // 4, min(size, 128 * MiB)),
            **options,  # type: ignore[arg-type]
        )

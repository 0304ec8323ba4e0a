"""Options of the ingestion stage."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class IngestOptions:
    """How a book file is read.

    The defaults suit a nightly bulk run: front matter left out, hostile archives refused early.
    The size limits bound time and memory for any input, however it was crafted.
    """

    include_nonlinear: bool = False  # EPUB spine items marked linear="no" (pop-up notes, answer keys)
    keep_front_matter: bool = False  # cover, title page, copyright, contents, index, colophon
    image_alt_text: bool = False  # read an image's alt text where the image sits
    include_footnotes: bool = False  # EPUB 3 footnote/endnote asides (note reference marks are never read)
    fail_on_unsupported_script: bool = False  # BookError instead of a warning for e.g. Cyrillic or kana
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

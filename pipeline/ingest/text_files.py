"""A text file's bytes and their decoding: by BOM, else UTF-8, else the likeliest legacy encoding.

Shared by the plain-text, Markdown, HTML and FictionBook readers.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.options import IngestOptions


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str
    warning: str = ""


def read_text_file(path: Path, options: IngestOptions) -> bytes:
    """The file's bytes, refusing files over the size limit."""
    try:
        size = path.stat().st_size
        if size > options.max_file_bytes:
            raise BookError(
                path,
                f"is {size:,} bytes, over the {options.max_file_bytes:,}-byte limit",
                "split the book, or raise the limit with --max-book-mb",
            )
        return path.read_bytes()
    except OSError as exc:
        raise BookError(
            path, f"cannot be read ({exc.strerror or exc})", "check the path and its permissions"
        ) from None


def decode(data: bytes) -> Decoded:
    """Decode text by its BOM, else as UTF-8, else as the likeliest of UTF-16, GB18030, Big5 and cp1252.

    Without a BOM the candidates that decode without error are scored by how much of the result is
    ordinary text (ASCII, CJK, common punctuation, accented Latin letters): bytes decoded with the wrong
    codec come out as control characters, rare scripts or nonsense ideographs from all over Unicode.
    """
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return Decoded(data.decode(encoding, errors="replace"), encoding)
    try:
        return Decoded(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    best: Decoded | None = None
    best_score = -1.0
    for encoding in _LEGACY_ENCODINGS:
        if encoding.startswith("utf-16") and len(data) % 2:
            continue
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        score = _plausibility(text)
        if score > best_score + 0.02:  # earlier candidates win near-ties
            best, best_score = Decoded(text, encoding), score
    if best is not None and best_score >= 0.9:
        return best
    return Decoded(
        data.decode("latin-1"),
        "latin-1",
        "the text's encoding could not be recognised; it was read as Latin-1 and may be garbled",
    )


_LEGACY_ENCODINGS = ("utf-16-le", "utf-16-be", "gb18030", "big5", "cp1252")
_PLAUSIBLE = re.compile(
    r"[\t\n\r\x20-\x7e\u00a0-\u00ff\u2010-\u2027\u2030-\u205e\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]"
)


def _plausibility(text: str) -> float:
    """The share of ordinary text characters in a sample of ``text``."""
    sample = text[:100_000]
    if not sample:
        return 1.0
    return len(_PLAUSIBLE.findall(sample)) / len(sample)

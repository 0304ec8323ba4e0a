"""Safe output file names built from book and chapter titles.

Titles come from books, i.e. from strangers: they must never become paths. A name built here has
no directory separators, no ``..``, no control or format characters, is not a Windows reserved
device name, has no trailing dots or spaces, fits the byte limit of common file systems in UTF-8,
and is unique (case-insensitively) within one set of outputs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

MAX_NAME_BYTES = 200  # under the 255-byte NAME_MAX of ext4/APFS/NTFS, leaving room for temp suffixes

_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} | {
    f"{stem}{digit}" for stem in ("COM", "LPT") for digit in "0123456789¹²³"
}
_FORBIDDEN = re.compile(r'[<>:"/\\|?*]')
_SPACES = re.compile(r"\s+")


def safe_stem(title: str, fallback: str = "Untitled", max_bytes: int = MAX_NAME_BYTES) -> str:
    """Turn a title into a file-name stem that is safe on Linux, macOS and Windows.

    Args:
        title: any text (a chapter or book title).
        fallback: used when nothing printable is left.
        max_bytes: cap on the UTF-8 length of the result.

    Returns:
        A non-empty stem with no extension.
    """
    text = unicodedata.normalize("NFC", title)
    # Control (Cc), format (Cf: bidi overrides, zero-width), surrogates and unassigned code points go.
    text = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
        for ch in text
        if unicodedata.category(ch) not in ("Cf", "Cs", "Co", "Cn")
    )
    text = _FORBIDDEN.sub("_", text)
    text = _SPACES.sub(" ", text).strip()
    text = _truncate_utf8(text, max_bytes)
    text = text.strip(" .")  # Windows drops trailing dots/spaces; a leading dot hides the file
    if not text or set(text) <= {"_", "."}:
        text = fallback
    if text.split(".")[0].strip().upper() in _WINDOWS_RESERVED:
        text = f"_{text}"
    return text


def numbered_names(titles: Sequence[str], extension: str) -> list[str]:
    """Names for per-chapter files: ``01 - Title.mp3``, numbered from 1, unique and safe.

    Args:
        titles: chapter titles in reading order.
        extension: without the dot, e.g. ``"mp3"``.

    Returns:
        One file name per title, in the same order.
    """
    width = max(2, len(str(len(titles))))
    stems = []
    for number, title in enumerate(titles, start=1):
        # Sanitise the whole stem, so "CON" needs no escaping once it reads "03 - CON".
        readable_title = title if safe_stem(title, fallback="") else "Chapter"
        stems.append(safe_stem(f"{number:0{width}d} - {readable_title}"))
    return [f"{stem}.{extension}" for stem in unique_stems(stems)]


def unique_stems(stems: Iterable[str], max_bytes: int = MAX_NAME_BYTES) -> list[str]:
    """Make stems unique, ignoring case (macOS and Windows file systems do), by adding ``(2)``, ``(3)``..."""
    taken: set[str] = set()
    result = []
    for stem in stems:
        candidate, counter = stem, 1
        while candidate.casefold() in taken:
            counter += 1
            suffix = f" ({counter})"
            candidate = _truncate_utf8(stem, max_bytes - len(suffix.encode())).rstrip(" .") + suffix
        taken.add(candidate.casefold())
        result.append(candidate)
    return result


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    # Cut on a character boundary; combining marks left dangling at the end are harmless.
    return encoded[:max_bytes].decode("utf-8", errors="ignore")

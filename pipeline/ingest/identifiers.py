"""What every reader finds in a book's metadata the same way: its ISBN and its place in a series."""

from __future__ import annotations

import re


def isbn_in(text: str, stated: bool = False) -> str:
    """The ISBN an identifier holds ('urn:isbn:978-…', 'ISBN 0-…', or bare digits when ``stated``
    or a 978/979 ISBN-13), without hyphens; '' when it holds none."""
    lowered = text.strip().lower()
    for prefix in ("urn:isbn:", "isbn:", "isbn"):
        if lowered.startswith(prefix):
            lowered, stated = lowered[len(prefix):], True
            break
    digits = re.sub(r"[\s-]", "", lowered).upper()
    if re.fullmatch(r"97[89]\d{10}", digits) or (stated and re.fullmatch(r"\d{9}[\dX]", digits)):
        return digits
    return ""


def series_position(text: str) -> str:
    """A place in a series as people write it: '2.0' -> '2', '2.5' stays, anything else ''."""
    match = re.fullmatch(r"\s*(\d{1,6})(?:\.(\d{1,3}))?\s*", text)
    if not match:
        return ""
    whole, fraction = match.group(1).lstrip("0") or "0", (match.group(2) or "").rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole

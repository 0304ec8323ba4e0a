"""One EPUB being read: its path, for error messages, and the warnings gathered on the way."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass
class Reading:
    """Warnings gathered while reading one EPUB."""

    path: Path
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        logger.debug("%s: %s", self.path, message)  # read_book logs the book's warnings, once each
        self.warnings.append(message)


def first_line(exc: BaseException) -> str:
    """A parser's complaint folded onto one short line, for a warning or a BookError."""
    return " ".join(str(exc).split())[:200] or type(exc).__name__

"""What the readers leave out of a book or stand in for, counted, and the warnings that say so.

Every warning counts: a listener who hears "a formula" or "Code listing, 12 lines, skipped" and
wonders how much was not read finds the figures in ``inspect`` and ``status``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class LeftOut:
    """Counts gathered while reading, summed over a book's documents."""

    formula_runs: int = 0  # stand-ins spoken ('a formula'), one per run of formulas without text
    formulas_from_markup: int = 0  # formulas without usable text, read from their own MathML
    placeholders: int = 0  # formulas whose alt text only said it was missing
    code_listings: int = 0  # code listings not read (announced or skipped)
    code_lines: int = 0  # their lines
    code_mode: str = "announce"  # what became of them
    navigation: int = 0  # navigation lines ('Parent topic: ...', 'Next topic: ...') left out
    letter_spaced: int = 0  # letter-spaced words ('T h i s') read as words

    def add(self, other: LeftOut) -> None:
        for field in fields(self):
            if field.name != "code_mode":
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        if other.code_listings:
            self.code_mode = other.code_mode


def left_out_warnings(left_out: LeftOut, formulas: int) -> list[str]:
    """One line per kind of thing left out or stood in for; ``formulas``: those without words."""
    warnings = []
    if formulas:
        warnings.append(
            f"{_many(formulas, 'formula')} without a text alternative (alttext) or simple MathML: read as "
            f"'a formula' {_many(left_out.formula_runs, 'time')}, once per run of formulas"
        )
    if left_out.placeholders:
        warnings.append(
            f"{_many(left_out.placeholders, 'formula alt text')} only said that none was given "
            "('Alternative text not available', 'image', a file name...): not read"
        )
    if left_out.formulas_from_markup:
        warnings.append(
            f"{_many(left_out.formulas_from_markup, 'formula')} without a text alternative "
            "read from the MathML"
        )
    if left_out.code_listings:
        done = "announced and skipped" if left_out.code_mode == "announce" else "left out"
        warnings.append(
            f"{_many(left_out.code_listings, 'code listing')} ({_many(left_out.code_lines, 'line')}) {done} "
            "(--code read reads them, --code skip leaves them out without a word)"
        )
    if left_out.navigation:
        warnings.append(
            f"left out {_many(left_out.navigation, 'navigation line')} "
            "('Parent topic:', 'Previous topic:', 'Next topic:')"
        )
    if left_out.letter_spaced:
        warnings.append(
            f"{_many(left_out.letter_spaced, 'letter-spaced word')} (small capitals) read as words"
        )
    return warnings


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")

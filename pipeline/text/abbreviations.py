"""Abbreviations: which are read as words (Mr. → Mister), and which never end a sentence."""

from __future__ import annotations

import re

from pipeline.text.marks import SEPARATOR

_EXPANSIONS = {  # abbreviation -> the words read for it
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Dr.": "Doctor",
    "Prof.": "Professor",
    "Mt.": "Mount",
    "e.g.": "for example",
    "i.e.": "that is",
    "etc.": "et cetera",
    "vs.": "versus",
    "approx.": "approximately",
    "Jr.": "Junior",
    "Sr.": "Senior",
    "St.": "Saint",
    "Capt.": "Captain",
    "Gen.": "General",
    "Lt.": "Lieutenant",
    "Col.": "Colonel",
    "Sgt.": "Sergeant",
    "Rev.": "Reverend",
    "Hon.": "Honourable",
    "Fr.": "Father",
}
_TITLES = frozenset(  # expanded only before a name
    (
        "Mr.",
        "Mrs.",
        "Ms.",
        "Dr.",
        "Prof.",
        "Mt.",
        "Capt.",
        "Gen.",
        "Lt.",
        "Col.",
        "Sgt.",
        "Rev.",
        "Hon.",
        "Fr.",
        "St.",
    )
)
# One pass led by the literal "." (a literal prefix is what makes a regex scan fast): the abbreviation
# before it is matched by fixed-width lookbehinds, one per length.
_EXPANDABLE = re.compile(
    r"\.(?:"
    + "|".join(
        rf"(?<=({'|'.join(re.escape(short[:-1]) for short in _EXPANSIONS if len(short) == size)})\.)"
        for size in sorted({len(short) for short in _EXPANSIONS})
    )
    + ")"
)

# Lower case and without their period: words after which a period does not end the sentence.
NOT_SENTENCE_ENDS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "vs",
        "etc",
        "eg",
        "ie",
        "cf",
        "al",
        "no",
        "nos",
        "vol",
        "vols",
        "fig",
        "figs",
        "ch",
        "chap",
        "pp",
        "p",
        "inc",
        "ltd",
        "co",
        "corp",
        "bros",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "cpl",
        "rev",
        "hon",
        "gov",
        "pres",
        "sen",
        "rep",
        "supt",
        "messrs",
        "mme",
        "mlle",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mon",
        "tue",
        "tues",
        "wed",
        "thu",
        "thur",
        "thurs",
        "fri",
        "sat",
        "sun",
        "approx",
        "dept",
        "est",
        "min",
        "max",
        "misc",
        "ave",
        "blvd",
        "rd",
    ]
)


def expand_abbreviations(text: str) -> str:
    """Mr. → Mister, e.g. → for example: read as words, and so not mistaken for sentence ends."""
    if "." not in text:
        return text
    pieces: list[str] = []
    done = 0
    for match in _EXPANDABLE.finditer(text):
        short = next(group for group in match.groups() if group) + "."
        start = match.end() - len(short)
        spoken = _expansion(text, start, match.end(), short) if start >= done else None
        if spoken is not None:
            pieces.append(text[done:start])
            pieces.append(spoken)
            done = match.end()
    pieces.append(text[done:])
    return "".join(pieces)


def _expansion(text: str, start: int, end: int, short: str) -> str | None:
    """The words for the abbreviation text[start:end], or None where it is not one."""
    before = text[start - 1] if start else " "
    if before.isalnum() or before in "._'":
        return None  # part of a longer word: "HMr." or "U.S."
    following = text[end : end + 3]
    next_letter = following.lstrip(" ")[:1]
    if short in _TITLES and not (following[:1] == " " and next_letter.isupper()):
        return None  # a title only before a name: "Dr. Watson", not "the road ends at St."
    ends_sentence = (
        not following or following[0] == SEPARATOR or following[:1] == " " and next_letter.isupper()
    )
    # "and so on, etc." ends a sentence: its period stays; "etc. and" goes on
    return _EXPANSIONS[short] + ("." if ends_sentence and short not in _TITLES else "")

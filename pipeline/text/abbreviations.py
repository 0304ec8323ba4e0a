"""Abbreviations: which are read as words (Mr. → Mister), and which never end a sentence.

An abbreviation followed by a lower-case word or a number is inside its sentence: it is read as its
words, and no period is left for the voice to pause at ("approx. 5 oz. of flour" → "approximately five
ounces of flour"; the units are read by the number rules).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
    "Approx.": "Approximately",
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
    "Ave.": "Avenue",
    "Blvd.": "Boulevard",
    "Rd.": "Road",
    "Dept.": "Department",
    "Corp.": "Corporation",
    "Ltd.": "Limited",
    "Bros.": "Brothers",
    "Gov.": "Governor",
    "Sen.": "Senator",
    "Rep.": "Representative",
    "Pres.": "President",
    "cf.": "compare",
    "Cf.": "Compare",
    "viz.": "namely",
    "V.": "See",  # vide, in notes: 'V. Weston: From Ritual to Romance' (only there: see ``_vide``)
}
# What follows 'V.' meaning 'see': a reference, with its punctuation or figures, before the sentence ends.
_REFERENCE_AFTER_VIDE = re.compile(
    rf" [A-Z](?:[^.!?\n{SEPARATOR}]|\b(?:St|Vol|vol|ch|p|pp|l|ll)\.){{0,80}}?"
    r"(?:[,:;]|\b(?:line|lines|verse|verses|chapter|p|pp)\b)"
)
# What follows 'V.' as a name's initial ('V. I. Lenin') or as a heading's number after another ('IV. ...').
_INITIAL_AFTER = re.compile(r" [A-Z]\.")
_NUMERAL_HEADING_BEFORE = re.compile(r"\bIV\. ")
# After a capitalised word and before no name, these name a street, not a person: "Baker St. and".
_STREET_WORDS = {"St.": "Street", "Dr.": "Drive"}
_STREET_TYPES = frozenset(("Ave.", "Blvd.", "Rd."))  # read out only after a name: "Abbey Rd."
_TITLES = frozenset(  # expanded only before a name
    (
        "V.",
        "Cf.",
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
        "Gov.",
        "Sen.",
        "Rep.",
        "Pres.",
    )
)


def lookbehinds(words: Iterable[str], template: str, joiner: str = "|") -> str:
    """Fixed-width lookbehinds for ``words``, one per length (Python allows no other): ``template``
    holds each length's alternation of words at ``{}``; the lookbehinds are joined by ``joiner``."""
    by_length: dict[int, list[str]] = {}
    for word in words:
        by_length.setdefault(len(word), []).append(re.escape(word))
    return joiner.join(template.format("|".join(group)) for _, group in sorted(by_length.items()))


# One pass led by the literal "." (a literal prefix is what makes a regex scan fast): the abbreviation
# before it is matched by fixed-width lookbehinds, one per length.
_EXPANDABLE = re.compile(r"\.(?:" + lookbehinds((short[:-1] for short in _EXPANSIONS), r"(?<=({})\.)") + ")")

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
        "oz",
        "lb",
        "lbs",
        "yd",
        "qt",
        "gal",
        "tsp",
        "tbsp",
        "hr",
        "hrs",
        "ca",
        "cf",
        "viz",
    ]
)

_KEPT_AS_WRITTEN = sorted(word for word in NOT_SENTENCE_ENDS if f"{word}." not in _EXPANSIONS)
# The period of an abbreviation read as written, where a lower-case word or a number follows it.
_INNER_PERIOD = re.compile(r"\.(?= [a-z0-9])(?:" + lookbehinds(_KEPT_AS_WRITTEN, r"(?<=\b(?i:{})\.)") + ")")


def expand_abbreviations(text: str) -> str:
    """Mr. → Mister, e.g. → for example: read as words, and so not mistaken for sentence ends; the
    period of an abbreviation kept as written ('Inc.', 'et al.') goes where the sentence goes on."""
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
    text = "".join(pieces)
    return _INNER_PERIOD.sub("", text) if ". " in text else text


def _expansion(text: str, start: int, end: int, short: str) -> str | None:
    """The words for the abbreviation text[start:end], or None where it is not one."""
    before = text[start - 1] if start else " "
    if before.isalnum() or before in "._'":
        return None  # part of a longer word: "HMr." or "U.S."
    following = text[end : end + 3]
    next_letter = following.lstrip(" ")[:1]
    goes_on = following[:1] == " " and (next_letter.islower() or next_letter.isdigit())
    if short in _STREET_WORDS and _after_a_name(text, start) and not next_letter.isupper():
        return _STREET_WORDS[short] + ("" if goes_on else ".")  # "Baker St. and", "on Elm Dr."
    if short in _STREET_TYPES and not _after_a_name(text, start):
        return None
    if short == "V." and not _vide(text, start, end):
        return None
    if short in _TITLES and not (following[:1] == " " and (next_letter.isupper() or goes_on)):
        return None  # a title only before a name: "Dr. Watson", not "the road ends at St."
    ends_sentence = (
        not following or following[0] == SEPARATOR or following[:1] == " " and next_letter.isupper()
    )
    # "and so on, etc." ends a sentence: its period stays; "etc. and" goes on
    return _EXPANSIONS[short] + ("." if ends_sentence and short not in _TITLES else "")


def _vide(text: str, start: int, end: int) -> bool:
    """Whether 'V.' means 'see', as in notes: it opens a sentence after another ('431. V. Kyd's Spanish
    Tragedy.'), or opens a paragraph before a reference ('V. Weston: From Ritual to Romance'); where
    'V. The Rose' opening a paragraph numbers a heading, and 'Virginia V. Woolf' is a name."""
    before = text[max(0, start - 2) : start]
    opens_paragraph = not before.strip() or before[-1:] == SEPARATOR
    opens_sentence = before.rstrip()[-1:] in ".;:"
    if not (opens_paragraph or opens_sentence) or _INITIAL_AFTER.match(text, end):
        return False
    if not opens_paragraph and text[end : end + 2][1:].isupper():
        return not _NUMERAL_HEADING_BEFORE.search(text, max(0, start - 80), start)
    return bool(_REFERENCE_AFTER_VIDE.match(text, end))


def _after_a_name(text: str, start: int) -> bool:
    """Whether the word before text[start] is capitalised and not the first of its sentence."""
    word_end = start - 1
    if word_end <= 0 or text[word_end] != " ":
        return False
    word_start = text.rfind(" ", 0, word_end) + 1
    word = text[word_start:word_end]
    before_word = text[max(0, word_start - 2) : word_start].strip()
    return word[:1].isupper() and word.isalpha() and before_word not in ("", ".", "!", "?", SEPARATOR)

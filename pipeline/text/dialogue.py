"""Quoted speech in a paragraph, for a job that reads dialogue with a voice of its own.

A paragraph is cut into stretches read by the narrator and stretches inside quotation marks, in
order and without losing a character: joined again they give the paragraph back. The text stage
then cuts sentences within each stretch, so a sentence never straddles a quotation's edge, and a
said-clause between two quotations (``"Come," she said, "now."``) is the narrator's.

- Marks: “…” ‘…’ "…" «…» ‹…› „…“ „…” ‚…‘ 「…」 『…』, and by the book's language: German, Danish,
  Czech… also »…« (the guillemets turned inwards, where “ closes); Swedish and Finnish ”…” and »…».
- A quotation inside a quotation is part of it. A quotation left open at the paragraph's end runs
  to that end: fiction leaves the closing mark off when a speech goes on in the next paragraph,
  which opens with a mark again.
- A straight ``'`` is an apostrophe, and so is ’ between two letters (don’t); a ``"`` right
  after a digit is an inch mark.
- A short quotation without punctuation (a title, a word in scare quotes: the “Pequod”, a
  so-called “expert”) stays with the narrator: only a quotation holding punctuation, or at least
  ``SPEECH_WORDS`` words, is speech.
"""

from __future__ import annotations

import re

from pipeline.types import DIALOGUE, NARRATOR

SPEECH_WORDS = 4
_PUNCTUATION = re.compile(r"[.,!?;:…—–。，！？；：、]")
_WORDS = re.compile(r"[^\W\d_]+|[\u3400-\u9fff]")
# opening mark -> the marks that close it
_COMMON = {"“": "”", "‘": "’", '"': '"', "«": "»", "‹": "›", "„": "“”", "‚": "‘’", "「": "」", "『": "』"}
_TURNED_IN = {"“": "”", '"': '"', "»": "«", "›": "‹", "„": "“", "‚": "‘", "«": "»", "「": "」", "『": "』"}
_SWEDISH = {"”": "”", "»": "»", '"': '"', "’": "’", "「": "」", "『": "』"}
_BY_LANGUAGE = {
    **dict.fromkeys(("de", "da", "cs", "sk", "sl", "hr", "lt", "et", "is"), _TURNED_IN),
    **dict.fromkeys(("sv", "fi"), _SWEDISH),
}


def quotation_marks(language: str) -> dict[str, str]:
    """Opening marks and their closing marks in a book written in ``language`` (BCP-47)."""
    return _BY_LANGUAGE.get(language.split("-")[0].lower(), _COMMON)


def split_roles(paragraph: str, language: str = "") -> list[tuple[str, str]]:
    """``paragraph`` as (role, text) stretches in order: NARRATOR, or DIALOGUE inside quotation
    marks (the marks included). Joined, the texts give ``paragraph`` back."""
    spans = [span for span in _quotations(paragraph, quotation_marks(language))
             if _is_speech(paragraph[span[0]:span[1]])]
    stretches: list[tuple[str, str]] = []
    at = 0
    for start, end in spans:
        if start > at:
            stretches.append((NARRATOR, paragraph[at:start]))
        stretches.append((DIALOGUE, paragraph[start:end]))
        at = end
    if at < len(paragraph) or not stretches:
        stretches.append((NARRATOR, paragraph[at:]))
    return stretches


def _quotations(text: str, marks: dict[str, str]) -> list[tuple[int, int]]:
    """The outermost quotations of ``text`` as (start, end), marks included."""
    closers = {closer for group in marks.values() for closer in group}
    spans: list[tuple[int, int]] = []
    open_marks: list[str] = []  # the quotations open around here, outermost first
    start = 0
    for at, ch in enumerate(text):
        if ch not in marks and ch not in closers:
            continue
        if open_marks and ch in marks[open_marks[-1]] and _closes(text, at):
            open_marks.pop()
            if not open_marks:
                spans.append((start, at + 1))
        elif any(ch in marks[mark] for mark in open_marks[:-1]) and _closes(text, at):
            del open_marks[next(i for i, mark in enumerate(open_marks) if ch in marks[mark]):]
            if not open_marks:
                spans.append((start, at + 1))
        elif ch in marks and _opens(text, at):
            if not open_marks:
                start = at
            open_marks.append(ch)
    if open_marks:
        spans.append((start, len(text)))
    return spans


def _opens(text: str, at: int) -> bool:
    """Whether the mark at ``at`` can open a quotation: not an inch mark, not an apostrophe (in a
    word, or before a year: ‘90s)."""
    before = text[at - 1] if at else " "
    if text[at] == '"' and before.isdigit():
        return False
    after = text[at + 1] if at + 1 < len(text) else " "
    return not (text[at] in "‘’" and (after.isdigit() or before.isalnum() and after.isalnum()))


def _closes(text: str, at: int) -> bool:
    """Whether the mark at ``at`` can close a quotation: ’ between two letters is an apostrophe."""
    if text[at] != "’":
        return True
    before = text[at - 1] if at else " "
    after = text[at + 1] if at + 1 < len(text) else " "
    return not (before.isalnum() and after.isalnum())


def _is_speech(quotation: str) -> bool:
    return bool(_PUNCTUATION.search(quotation)) or len(_WORDS.findall(quotation)) >= SPEECH_WORDS

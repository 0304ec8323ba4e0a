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
- Only real speech is speech. A quotation inside a sentence, right after a word (a title, a word
  in scare quotes: he read “The Old Man and the Sea” twice, the so-called “experts,” who…), stays
  with the narrator unless that word says it is speech (said, asked, shouted…, 说, 问…), the
  quotation holds a sentence of its own (a stop followed by more words), or it ends in a question,
  an exclamation or a CJK stop (彼は『どこへ行くの？』と聞いた). A quotation that opens the paragraph
  or follows punctuation (“Come,” she said / she said: “Come.”) is speech when it ends in
  punctuation, or holds ``SPEECH_WORDS`` words and does not run on into the sentence (“The Old Man
  and the Sea” is short: a title).
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
             if _is_speech(paragraph, *span)]
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


_SPEECH_VERBS = frozenset("""
say says said ask asks asked shout shouts shouted cry cries cried whisper whispers whispered reply
replies replied answer answers answered yell yells yelled mutter mutters muttered
murmur murmurs murmured scream screamed exclaim exclaimed add added continue continued begin began
repeat repeated roar roared snap snapped hiss hissed sigh sighed insist insisted demand demanded
""".split())
_CJK_SPEECH = frozenset("说道问喊叫答讲曰云")
_SENTENCE_INSIDE = re.compile(r"[.!?…。！？](?:[\"'”’»«」』)\]]*)\s*[^\W_]")
_QUESTION_OR_CRY = re.compile(r"[!?。！？…]\W*$")
_ENDS_IN_PUNCTUATION = re.compile(r"[.,!?;:…—–。，！？；：、]\W*$")


def _is_speech(text: str, start: int, end: int) -> bool:
    """Whether the quotation ``text[start:end]`` (its marks included) is speech, by what it holds
    and where it stands in its sentence."""
    quotation = text[start:end]
    before = text[:start].rstrip()
    inner = quotation[1:-1] if end < len(text) or _closed(quotation) else quotation[1:]
    if _SENTENCE_INSIDE.search(inner.strip()):
        return True
    if before and before[-1].isalnum():  # inside a sentence, right after a word
        word = re.findall(r"[\w'’-]+$", before)  # 'so-called' is not 'called'
        return ((bool(word) and word[0].lower() in _SPEECH_VERBS) or before[-1] in _CJK_SPEECH
                or bool(_QUESTION_OR_CRY.search(inner)))
    if _ENDS_IN_PUNCTUATION.search(inner):
        return True
    after = text[end:].lstrip()
    runs_on = bool(after) and (after[0].isalnum())
    return not runs_on and len(_WORDS.findall(quotation)) >= SPEECH_WORDS


def _closed(quotation: str) -> bool:
    return len(quotation) > 1 and not quotation[-1].isalnum()

"""Roman numerals as words, where they are surely numbers.

That is after a chapter word ("Chapter IV", "Part ii", "Type II"), after a regnal name ("Henry VIII" →
"Henry the eighth"), after "World War" and alone at the head of a paragraph ("XII. The Storm"). A lone
capital is a letter where a letter is likelier: ``L``, ``C``, ``D`` and ``M`` always ("Appendix D",
"Type C"), ``I`` unless a chapter word or "World War" stands before it, or a regnal name that no verb
of the pronoun follows ("Charles I was beheaded", but "told Charles I would"). Other capitals after
other words ("Plan B") are never numerals.
"""

from __future__ import annotations

import re

from pipeline.text.language import Languages
from pipeline.text.marks import ELLIPSIS, PAUSE_MARKS, SEPARATOR
from pipeline.text.numbers import cardinal, en_ordinal
from pipeline.text.reading import padded

_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_CHAPTER_WORDS = frozenset(
    [
        "Chapter",
        "CHAPTER",
        "Part",
        "PART",
        "Book",
        "BOOK",
        "Volume",
        "VOLUME",
        "Vol",
        "Act",
        "ACT",
        "Scene",
        "SCENE",
        "Section",
        "SECTION",
        "Canto",
        "CANTO",
        "Letter",
        "LETTER",
        "Appendix",
        "APPENDIX",
        "Episode",
        "Psalm",
        "Article",
        "Title",
        "Phase",
        "Stage",
        "Level",
        "Type",
        "Class",
        "Grade",
        "Category",
        "Annex",
        "Schedule",
        "Plate",
        "Vatican",
    ]
)
_SAME_WORK = frozenset(("Id", "Ibid", "Ib"))  # 'Id. iii, verse 24': the work just cited
_CHAPTER_ABBREVIATIONS = frozenset(("ch", "Ch", "chap", "Chap", "bk", "Bk", "vol", "pt", "Pt"))  # with their period
# Numerals listed after a plural chapter word: 'Parts II and III', 'Books I, II and IV'.
_LISTED_AFTER_PLURAL = re.compile(
    r"\b(?:Parts|Chapters|Books|Volumes|Acts|Scenes|Sections|Cantos|Letters|Articles|Psalms|Appendices"
    r"|PARTS|CHAPTERS|BOOKS|VOLUMES|ACTS|CANTOS)(?: [IVXLCivxlc]{1,8}(?:,| and| or| to| &)?)*$"
)
# A lower-case numeral in a citation, between commas or before the lines it numbers: 'Metamorphoses,
# iii. 55-7', 'Tristan und Isolde, i, verses 5-8'. A paragraph's end is its text's end: a chapter's
# paragraphs are normalised together, joined by SEPARATOR.
_CITATION_AFTER = re.compile(rf"[.,;:] ?(?=[a-z]|$|{re.escape(SEPARATOR)})|[.,] [a-z]")
# Lone capitals after a chapter word that are letters, not numerals: "Appendix D", "Section C".
_LETTERS_NOT_NUMERALS = frozenset("LCDMlcdm")
# Words that follow the pronoun "I" and hardly a king's numeral: "told Charles I would".
_PRONOUN_VERBS = frozenset(
    "am think know have had will would can could should shall may might must do did said say saw see "
    "believe suppose guess hope feel felt told went got need love like want wanted mean meant wonder "
    "remember heard thought found came asked replied answered beg wish fear".split()
)
_REGNAL_NAMES = frozenset(
    [
        "King",
        "Queen",
        "Pope",
        "Emperor",
        "Tsar",
        "Czar",
        "Henry",
        "Louis",
        "Charles",
        "George",
        "Edward",
        "William",
        "Elizabeth",
        "James",
        "Richard",
        "Pius",
        "Benedict",
        "Gregory",
        "Leo",
        "Napoleon",
        "Peter",
        "Catherine",
        "Frederick",
        "Philip",
        "Alexander",
        "Nicholas",
        "Ivan",
        "John",
        "Paul",
        "Innocent",
        "Clement",
        "Ludwig",
        "Alfonso",
        "Ferdinand",
    ]
)
_NUMERAL_END = r"(?=['’]s\b|[^A-Za-z0-9'’]|$)"  # a possessive may follow: "Henry VIII's"
# A numeral after a space, found in one pass led by the literal space; the word before it decides.
_SPACED_NUMERAL = re.compile(rf" ([IVXLCDM]{{1,8}}|[ivxlcdm]{{1,8}}){_NUMERAL_END}")
_OPENING_PUNCTUATION = " ,.!?;:，。！？、；：" + PAUSE_MARKS + ELLIPSIS
_PARAGRAPH_OPENING_NUMERAL = re.compile(
    rf"{SEPARATOR}[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}"
)
_TEXT_OPENING_NUMERAL = re.compile(rf"[{_OPENING_PUNCTUATION}]*([IVXLC]{{1,7}}){_NUMERAL_END}")
_HEADING_AFTER = re.compile(r"[.:] (?![A-Z]\.)[A-Z]")  # a title follows, not an initial: 'I. M. Pei' 
# A numeral opening a sentence as a heading's number does: 'The Clover. II. The Rose'.
_SENTENCE_OPENING_NUMERAL = re.compile(r"(?<=[.!?] )([IVXLC]{1,7})(?=[.:] (?![A-Z]\.)[A-Z])")


def spell_roman_numerals(text: str, languages: Languages) -> str:
    """Roman numerals that are surely numbers, as words; run after everything unspeakable is gone, so
    that what follows a numeral is what the listener will hear follow it."""
    pieces: list[str] = []
    done = 0
    for match in _SPACED_NUMERAL.finditer(text):
        spoken = _numeral_after_word(match, languages)
        if spoken:
            pieces.append(text[done : match.start(1)])
            pieces.append(spoken)
            done = match.end()
    if pieces:
        pieces.append(text[done:])
        text = "".join(pieces)
    if SEPARATOR in text:  # a literal-led pattern: one fast scan
        text = _PARAGRAPH_OPENING_NUMERAL.sub(lambda m: _opening_numeral(m, languages), text)
    if ". " in text:
        text = _SENTENCE_OPENING_NUMERAL.sub(lambda m: _opening_numeral(m, languages), text)
    opening = _TEXT_OPENING_NUMERAL.match(text)
    if opening:
        text = _opening_numeral(opening, languages) + text[opening.end() :]
    return text


def _numeral_after_word(match: re.Match[str], languages: Languages) -> str:
    """'Chapter IV' → 'four', 'Part ii' → 'two', 'Henry VIII' → 'the eighth'; '' when not a number."""
    text, space = match.string, match.start()
    numeral = match.group(1)
    look_back = max(0, space - 12)
    previous = text[max(text.rfind(" ", look_back, space) + 1, look_back) : space].rpartition(SEPARATOR)[2]
    previous, period = previous.rstrip("."), previous.endswith(".")
    # 'ch. iv' (its period may be gone already, where a lower-case word follows: 'ch iv, a letter')
    abbreviation = previous in _CHAPTER_ABBREVIATIONS and (period or bool(_CITATION_AFTER.match(text, match.end())))
    chapter = (
        previous in _CHAPTER_WORDS
        or abbreviation
        or text.endswith(("World War", "WORLD WAR"), 0, space)
        or bool(_LISTED_AFTER_PLURAL.search(text, max(0, space - 60), space))
        or _cited(text, previous, numeral, match.end(), _opens_sentence(text, space - len(previous)))
    )
    if len(numeral) == 1 and numeral in _LETTERS_NOT_NUMERALS:
        return ""
    regnal = previous in _REGNAL_NAMES and numeral.isupper() and _regnal_numeral(text, numeral, match.end())
    if not chapter and not regnal:
        return ""
    value = roman_value(numeral)
    if value is None:
        return ""
    language = languages.around(text, match.start(1), match.end())
    if chapter:
        spoken = cardinal(value, language)
    elif language == "en":
        spoken = f"the {en_ordinal(value)}"
    else:
        return ""
    return padded(spoken, text, match.start(1), match.end())


def _cited(text: str, previous: str, numeral: str, end: int, first_word: bool) -> bool:
    """A numeral of a citation, which a comma, or a period and the words it numbers, follow: a small
    one after a comma, a title or another numeral ('Isolde, i,', 'Inferno iii. 55', 'Id. iii,',
    'III. i:'), a capital one after a comma ('Antony and Cleopatra, II. ii.'). ``first_word``: the
    word before opens its sentence ('On vi, ...' names no book)."""
    if not _CITATION_AFTER.match(text, end):
        return False
    # after a word of two letters or more: not a stray comma (',, i:') nor a letter's ('Q, i:')
    word = previous.rstrip(",")
    after_comma = previous.endswith(",") and len(word) > 1 and any(ch.isalnum() for ch in word)
    if all(ch in "ivx" for ch in numeral):  # books and cantos: 'mix' and 'dim' are words
        # a title's word, not an initial ('Q. i:')
        named = len(previous) > 1 and previous[:1].isupper() and previous.isalpha() and not first_word
        after_title = named or previous in _SAME_WORK
        after_numeral = len(previous) > 1 and previous.isupper() and roman_value(previous) is not None
        return after_comma or after_title or after_numeral
    return len(numeral) > 1 and numeral.isupper() and after_comma


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` is the first of its sentence or paragraph."""
    before = text[max(0, start - 3) : start].rstrip(" ")
    return not before or before[-1] in ".!?" + SEPARATOR


def _regnal_numeral(text: str, numeral: str, end: int) -> bool:
    """Whether a numeral after a regnal name is one: 'I' only where no verb of the pronoun follows."""
    if numeral != "I":
        return True
    following = text[end : end + 12].lstrip(" ").split(" ", 1)[0]
    return following not in _PRONOUN_VERBS and not following.startswith(("'", "’"))


def _opening_numeral(match: re.Match[str], languages: Languages) -> str:
    """'XII. The Storm' → 'twelve. The Storm'; a paragraph that is only 'IV' → 'four'."""
    text, numeral_start, end = match.string, match.start(1), match.end(1)
    value = roman_value(match.group(1))
    rest = text[end : end + 8].lstrip(" " + PAUSE_MARKS + ELLIPSIS)  # trailing pauses vanish later
    closes = not rest or rest[0] in (".", ":", SEPARATOR)
    # "C" alone is likely a letter, "I" too unless it numbers a heading: "I. The Beginning"
    single_letter = end - numeral_start == 1 and (
        text[numeral_start] not in "VXI" or text[numeral_start] == "I" and not _HEADING_AFTER.match(text, end)
    )
    if value is None or not closes or single_letter or (value == 1 and rest[:1] not in (".", ":")):
        return match.group(0)
    spoken = cardinal(value, languages.around(text, numeral_start, end))
    return text[match.start() : numeral_start] + padded(spoken, text, numeral_start, end)


def roman_value(numeral: str) -> int | None:
    """'XIV' → 14; None unless ``numeral`` is a well-formed Roman numeral of 1-3999."""
    numeral = numeral.upper()
    if not numeral or any(ch not in _ROMAN_VALUES for ch in numeral):
        return None
    total = 0
    for index, ch in enumerate(numeral):
        value = _ROMAN_VALUES[ch]
        following = _ROMAN_VALUES[numeral[index + 1]] if index + 1 < len(numeral) else 0
        total += -value if value < following else value
    if not 0 < total < 4000 or to_roman(total) != numeral:
        return None
    return total


def to_roman(number: int) -> str:
    """14 → 'XIV'."""
    out = ""
    for value, letters in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while number >= value:
            out += letters
            number -= value
    return out

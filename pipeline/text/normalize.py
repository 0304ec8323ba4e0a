"""Making text speakable by ChatTTS, which reads only Chinese characters, English letters and a few marks.

The output alphabet is ``marks.ALLOWED``: CJK unified ideographs U+4E00-U+9FFF, A-Z a-z, the space and
``，。！？、；：,.!?;:'``. Everything else is, on purpose, one of:

- **spoken**: numbers, dates, times, money, percentages, units, ordinals, Roman chapter numbers, the
  symbols ``& + = @ % ° × ÷ § ± ~`` and e-mail addresses become words in the language of the
  sentence around them (``只有8G内存`` → ``只有八G内存``); digit strings that are no quantity (phone
  numbers, ISBNs, postcodes, serial numbers) are read digit by digit;
  a link is read as its site (``example dot com``) or, with ``read_urls="drop"``, left out and counted;
- **a pause**: brackets, dashes, line breaks and ellipses become commas or full stops;
- **folded**: full-width letters and digits become ASCII (NFKC), accented Latin letters lose their
  accents (``café`` → ``cafe``), curly apostrophes become ``'``;
- **dropped silently**: quotation marks, book-title marks, invisible characters (zero-width, bidi
  controls, soft hyphens), formatting marks (``* _ | • ·``) and other punctuation — none of them is a word;
- **dropped and counted**: emoji, other symbols, and letters of scripts the voice cannot read (kana,
  Hangul, Cyrillic, Greek, Arabic, rare CJK extension characters...). The counts become warnings.

Normalising twice gives the same text as normalising once.

Speed matters (a long novel is 10-15 MB of text, and every regex pass or substring test over it costs a
scan), so a chapter is normalised in one piece (paragraphs joined by ``SEPARATOR``), the characters it
holds are collected once and every step is skipped unless they call for it, characters needing
attention are mapped through a per-character cache, and each number is read by trying only the rules
that can start where it does.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from pipeline.text.abbreviations import expand_abbreviations
from pipeline.text.characters import SPOKEN_SYMBOLS, basic_forms
from pipeline.text.drops import Drops, classify
from pipeline.text.language import Languages
from pipeline.text.links import read_links
from pipeline.text.marks import CJK_RANGE, CUBED, DASH_MARK, ELLIPSIS, PAUSE_MARKS, SEPARATOR, SQUARED
from pipeline.text.number_rules import spell_numbers
from pipeline.text.options import TextOptions
from pipeline.text.punctuation import LEADING_MARKS, tidy
from pipeline.text.roman_numerals import spell_roman_numerals
from pipeline.text.symbols import SYMBOL_CHARACTERS, spell_symbols

_COMMON_ASCII = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.!?;:")
_LEFTOVER = re.compile(rf"[^A-Za-z{CJK_RANGE} ，。！？、；：,.!?;:'{ELLIPSIS}{PAUSE_MARKS}{SEPARATOR}]+")
# What may be left after the readers: the first pass mapped every other character.
_POSSIBLE_LEFTOVERS = frozenset('"#$%&()*+-/<=>@[\\]^_`{|}~' + SQUARED + CUBED) | frozenset(
    ch for ch in SPOKEN_SYMBOLS if not ch.isascii()
)


def normalize_text(text: str, options: TextOptions | None = None, drops: Drops | None = None) -> str:
    """One paragraph (or title) in ChatTTS's alphabet, numbers and symbols spoken.

    Args:
        text: the paragraph as the book has it.
        options: language forcing and how links are read.
        drops: when given, counts of what was dropped are added to it.

    Returns:
        The text the paragraph's sentences are cut from: single-spaced, without leading or trailing
        spaces.
    """
    return normalize_paragraphs([text], options, drops)[0]


def normalize_paragraphs(
    paragraphs: Sequence[str], options: TextOptions | None = None, drops: Drops | None = None
) -> list[str]:
    """``normalize_text`` for many paragraphs at once, in one pass per step.

    The paragraphs are joined with ``SEPARATOR``, a character no rule reads across, so the result is
    the same as normalising each alone, without paying each step's fixed cost once per paragraph.
    ``options.language`` ('zh' or 'en') forces how numbers and symbols are spoken; '' decides from the
    text around each one, then from the paragraph.
    """
    options = options or TextOptions()
    drops = drops if drops is not None else Drops()
    if not paragraphs:
        return []
    text = basic_forms(_joined(paragraphs), drops)
    if "->" in text:
        text = text.replace("->", " → ")  # an arrow typed in ASCII
    # Languages are judged after the first pass, when quotes and unreadable letters are gone.
    languages = Languages(text.split(SEPARATOR), options.language)
    # Every later step is skipped unless a character it needs is present. Each test of a whole chapter
    # costs a scan, so the unusual characters are collected once, here; no later step adds any.
    present = present_characters(text)
    if "-" in present and "--" in text:
        text = re.sub(r"-{2,}", f" {DASH_MARK} ", text)
    if ".." in text or ". ." in text:
        text = re.sub(r"\.(?: ?\.){2,}", f" {ELLIPSIS} ", text)
    if "@" in present or ("/" in present and "://" in text) or "www." in text:
        text = read_links(text, options.read_urls, drops)
    if not present.isdisjoint(string.digits):
        text = spell_numbers(text, languages)
    if not present.isdisjoint(SYMBOL_CHARACTERS):
        text = spell_symbols(text, languages)
    text = _drop_leftovers(text, drops, present)
    # Abbreviations and Roman numerals last: whether "Mr." is a title or "V" a number depends on the
    # words and punctuation the listener will hear next to them.
    tidied = expand_abbreviations(tidy(text))
    text = spell_roman_numerals(tidied, languages)
    if text is not tidied and not text.isascii():
        text = tidy(text)  # a numeral read in Chinese: the marks beside it become full-width
    return [part.strip().lstrip(LEADING_MARKS) for part in text.split(SEPARATOR)]


def present_characters(text: str) -> frozenset[str]:
    """The characters of ``text`` other than ASCII letters, spaces and sentence marks (all of them for
    text that is not ASCII), found in one fast pass."""
    return frozenset(text.translate(_COMMON_ASCII) if text.isascii() else text)


def _joined(paragraphs: Sequence[str]) -> str:
    """The paragraphs joined by ``SEPARATOR``; one the book itself holds is deleted, as other controls."""
    text = SEPARATOR.join(paragraphs)
    if text.count(SEPARATOR) != len(paragraphs) - 1:
        text = SEPARATOR.join(paragraph.replace(SEPARATOR, "") for paragraph in paragraphs)
    return text


def _drop_leftovers(text: str, drops: Drops, present: frozenset[str]) -> str:
    """Hyphens and slashes between words become spaces; anything else outside the alphabet is dropped.

    ``present``: the unusual characters the text held before numbers and symbols were read.
    """
    if "-" in present and " - " in text:
        text = text.replace(" - ", f" {DASH_MARK} ")
    for silent in "-/_*":  # word joiners and emphasis marks: a space, nothing to count
        if silent in present:
            text = text.replace(silent, " ")
    # Digits are all read by now; a symbol may have been (a "$" before a number) or not (a lone "$").
    if not any(ch in text for ch in present & _POSSIBLE_LEFTOVERS):
        return text

    def replace(match: re.Match[str]) -> str:
        for ch in match.group(0):
            kind, script = classify(ch)
            drops.count(kind, script)
        return " "

    return _LEFTOVER.sub(replace, text)

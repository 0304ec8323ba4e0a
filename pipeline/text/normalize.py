"""Making text speakable by ChatTTS, which reads only Chinese characters, English letters and a few marks.

The output alphabet is ``ALLOWED``: CJK unified ideographs U+4E00-U+9FFF, A-Z a-z, the space and
``，。！？、；：,.!?;:'``. Everything else is, on purpose, one of:

- **spoken**: numbers, dates, times, money, percentages, units, ordinals, Roman chapter numbers, the
  symbols ``& + = @ % ° × ÷ § ± ~`` and e-mail addresses become words in the language around them;
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
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

CJK_RANGE = "\u4e00-\u9fff"
ALLOWED = re.compile(rf"[A-Za-z{CJK_RANGE} ，。！？、；：,.!?;:']*")
_CJK = re.compile(f"[{CJK_RANGE}]")

# Placeholders that carry meaning between steps. They are ASCII control characters, which the first
# step deletes from the book's own text, so they cannot be confused with it, and an English chapter
# stays a one-byte-per-character string (Python's string and regex code is much faster on those).
SQUARED, CUBED = "\x02", "\x03"
ELLIPSIS = "\x05"  # resolved to '.' or ',' by what follows
DASH_MARK = "\x06"  # a dash, bracket or line break: a pause, resolved to ',' or '，'
# Between paragraphs normalised together; no rule reads across it. Not \x1c-\x1f: Python counts those
# as whitespace, so \s in a pattern would step over them into the next paragraph.
SEPARATOR = "\x1a"

_KEPT_CJK_PUNCTUATION = "、。，！？：；"
# Characters needing no attention in the first pass: printable ASCII except quotes and brackets,
# CJK ideographs and the CJK punctuation the voice reads.
_SPECIAL = re.compile(
    rf"[^\x20\x21\x23-\x27\x2a-\x5a\x5c\x5e\x5f\x61-\x7a\x7c\x7e{CJK_RANGE}{_KEPT_CJK_PUNCTUATION}{SEPARATOR}]"
)
_INVISIBLE = frozenset(
    chr(code)
    for code in [
        *range(0x09),
        0x0B,
        0x0C,
        *range(0x0E, 0x20),
        0x7F,
        *range(0x80, 0xA0),
        0x00AD,
        0x034F,
        0x061C,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x180E,
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2070),
        0xFE0E,
        0xFE0F,
        0xFEFF,
        *range(0xFFF9, 0xFFFC),
    ]
)
_PUNCTUATION = {
    "\t": " ",
    "\n": f" {DASH_MARK} ",
    "\r": f" {DASH_MARK} ",
    "\u2028": f" {DASH_MARK} ",
    "\u2029": f" {DASH_MARK} ",
    # quotation marks and title marks: not words
    **dict.fromkeys('"“”„‟«»‹›〝〞〟「」『』《》〈〉＂', ""),
    # single quotes become apostrophes; lone ones are removed by tidy()
    **dict.fromkeys("‘’‚‛′`´＇", "'"),
    # brackets and dashes: pauses
    **dict.fromkeys("()[]{}（）【】〔〕〖〗［］｛｝—―‒–⸺⸻", f" {DASH_MARK} "),
    "…": f" {ELLIPSIS} ",
    "⋯": f" {ELLIPSIS} ",
    "²": SQUARED,
    "³": CUBED,
    "〇": "零",
    "−": "-",
    "‐": "-",
    "‑": "-",
    "〜": "~",
    "～": "~",
    "⁄": "/",
    "∕": "/",
    "｡": "。",
    "､": "、",
    "　": " ",
}
# Kept for the number and symbol readers, which speak them.
_SPOKEN_SYMBOLS = frozenset("&+=@%×÷±§≈≠≤≥°√∞~<>$€£¥₩₹₽‰#")
_FOLD_SPECIAL = {
    "ß": "ss",
    "ẞ": "SS",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "ł": "l",
    "Ł": "L",
    "đ": "d",
    "Đ": "D",
    "þ": "th",
    "Þ": "Th",
    "ð": "d",
    "Ð": "D",
    "ı": "i",
    "ħ": "h",
    "Ħ": "H",
    "ŋ": "ng",
    "Ŋ": "Ng",
    "ĸ": "k",
    "ſ": "s",
}

_URL = re.compile(
    rf"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'，。！？、；：）」』】{SEPARATOR}]+", re.IGNORECASE
)
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
_EN_ABBREVIATIONS = {
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
_BEFORE_CAPITAL = frozenset(
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
)  # titles: only before a name
# One pass led by the literal "." (a literal prefix is what makes a regex scan fast): the abbreviation
# before it is matched by fixed-width lookbehinds, one per length.
_EN_ABBREVIATION = re.compile(
    r"\.(?:"
    + "|".join(
        rf"(?<=({'|'.join(re.escape(short[:-1]) for short in _EN_ABBREVIATIONS if len(short) == size)})\.)"
        for size in sorted({len(short) for short in _EN_ABBREVIATIONS})
    )
    + ")"
)


@dataclass
class Drops:
    """What normalisation left out on purpose and counts: shown to the user as warnings."""

    emoji: int = 0
    symbols: int = 0
    links: int = 0
    scripts: Counter[str] = field(default_factory=Counter)  # unsupported script name -> letters dropped

    def count(self, kind: str, script: str) -> None:
        if kind == "emoji":
            self.emoji += 1
        elif kind == "symbol":
            self.symbols += 1
        elif kind == "script":
            self.scripts[script] += 1

    def __bool__(self) -> bool:
        return bool(self.emoji or self.symbols or self.links or self.scripts)

    def describe(self) -> list[str]:
        """One phrase per kind of drop, e.g. '3 emoji dropped'."""
        phrases = []
        if self.scripts:
            detail = ", ".join(f"{name} {count}" for name, count in self.scripts.most_common())
            phrases.append(
                f"{sum(self.scripts.values())} letters in scripts the voice cannot read dropped ({detail})"
            )
        if self.emoji:
            phrases.append(f"{self.emoji} emoji dropped")
        if self.symbols:
            phrases.append(f"{self.symbols} symbols dropped")
        if self.links:
            phrases.append(f"{self.links} links dropped")
        return phrases


def paragraph_language(text: str, forced: str = "") -> str:
    """'zh' when Chinese characters outnumber English words (ChatTTS's own rule), else 'en'.

    Counted cheaply: non-ASCII characters take two extra bytes in UTF-8 when they are CJK, and words
    are about as many as spaces.
    """
    if forced:
        return forced
    if text.isascii():
        return "en"
    wide = (len(text.encode("utf-8", "surrogatepass")) - len(text)) // 2
    words = text.count(" ") + 1
    return "zh" if wide > words else "en"


def normalize_paragraph(
    text: str, language: str = "", read_urls: str = "domain", drops: Drops | None = None
) -> str:
    """``text`` rewritten in ChatTTS's alphabet; see the module docstring for what happens to what.

    Args:
        text: one paragraph or title.
        language: 'zh' or 'en' to force how numbers and symbols are spoken; '' decides from the text
            around each one, then from the paragraph.
        read_urls: 'domain' reads a link as its site; 'drop' leaves it out (counted).
        drops: counts of what was dropped are added here.

    Returns:
        The speakable text, single-spaced, without leading or trailing spaces.
    """
    return normalize_paragraphs([text], language, read_urls, drops)[0]


def normalize_paragraphs(
    paragraphs: Sequence[str], language: str = "", read_urls: str = "domain", drops: Drops | None = None
) -> list[str]:
    """``normalize_paragraph`` for many paragraphs at once, in one pass per step.

    The paragraphs are joined with ``SEPARATOR``, a character no rule reads across, so the result is
    the same as normalising each alone, without paying each step's fixed cost once per paragraph.
    """
    from pipeline.text.spoken import spell_out, spell_roman_numerals

    drops = drops if drops is not None else Drops()
    if not paragraphs:
        return []
    text = SEPARATOR.join(paragraphs)
    if (
        text.count(SEPARATOR) != len(paragraphs) - 1
    ):  # the book holds our separator: delete it, as other controls
        text = SEPARATOR.join(paragraph.replace(SEPARATOR, "") for paragraph in paragraphs)
    text = basic_forms(text, drops)
    # Languages are judged after the first pass, when quotes and unreadable letters are gone.
    languages = ParagraphLanguages(
        [language] if language else [paragraph_language(paragraph) for paragraph in text.split(SEPARATOR)]
    )
    # Every later step is skipped unless a character it needs is present. Each test of a whole chapter
    # costs a scan, so the unusual characters are collected once, here; no later step adds any.
    present = present_characters(text)
    if "-" in present and "--" in text:
        text = re.sub(r"-{2,}", f" {DASH_MARK} ", text)
    if ".." in text or ". ." in text:
        text = re.sub(r"\.(?: ?\.){2,}", f" {ELLIPSIS} ", text)
    if "@" in present or ("/" in present and "://" in text) or "www." in text:
        text = _links(text, read_urls, drops)
    text = spell_out(text, languages.at, language, present)
    text = _leftovers(text, drops, present)
    # Abbreviations and Roman numerals last: whether "Mr." is a title or "V" a number depends on the
    # words and punctuation the listener will hear next to them.
    tidied = _expand_abbreviations(tidy(text))
    text = spell_roman_numerals(tidied, languages.at, language)
    if text is not tidied and not text.isascii():
        text = tidy(text)  # a numeral read in Chinese: the marks beside it become full-width
    return [part.strip().lstrip(_LEADING) for part in text.split(SEPARATOR)]


_COMMON_ASCII = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.!?;:")


def present_characters(text: str) -> frozenset[str]:
    """The characters of ``text`` other than ASCII letters, spaces and sentence marks (all of them for
    text that is not ASCII), found in one fast pass."""
    return frozenset(text.translate(_COMMON_ASCII) if text.isascii() else text)


class ParagraphLanguages:
    """The default language of the paragraph a position of the joined text falls in."""

    def __init__(self, languages: list[str]) -> None:
        self._languages = languages
        self._single = languages[0] if len(set(languages)) == 1 else ""

    def at(self, text: str, position: int) -> str:
        """``text`` is the joined text as it stands when asked (rules rewrite it as they go)."""
        if self._single:
            return self._single
        index = text.count(SEPARATOR, 0, position)  # rare: only numbers with no letter beside them ask
        return self._languages[min(index, len(self._languages) - 1)]


# --- first pass: one character at a time, cached ----------------------------------------------------


def basic_forms(text: str, drops: Drops) -> str:
    """Quotes, brackets, dashes, invisible characters, NFKC forms, accents and unreadable letters."""
    if not _SPECIAL.search(text):
        return text

    def replace(match: re.Match[str]) -> str:
        replacement, kind, script = basic_form(match.group(0))
        if kind:
            drops.count(kind, script)
        return replacement

    return _SPECIAL.sub(replace, text)


@lru_cache(maxsize=65_536)
def basic_form(ch: str) -> tuple[str, str, str]:
    """(replacement, kind of drop or '', script name or '') for one character needing attention."""
    if ch in _PUNCTUATION:
        return _PUNCTUATION[ch], "", ""
    if ch in _INVISIBLE:
        return "", "", ""
    if ch in _SPOKEN_SYMBOLS or ch.isascii():
        return ch, "", ""
    compatible = unicodedata.normalize("NFKC", ch)
    if compatible != ch:  # full-width Ａ１, ligatures, circled numbers, ℃, ½ ...
        parts = [basic_form(part) if _SPECIAL.match(part) else (part, "", "") for part in compatible]
        kinds = [(kind, script) for _, kind, script in parts if kind]
        kind, script = kinds[0] if kinds else ("", "")
        return "".join(part for part, _, _ in parts), kind, script
    if ch in _FOLD_SPECIAL:
        return _FOLD_SPECIAL[ch], "", ""
    folded = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if folded != ch and folded.isascii() and folded.isalpha():
        return folded, "", ""
    kind, script = classify(ch)
    if kind == "script":
        return "", kind, script
    if kind == "silent" and unicodedata.category(ch)[0] == "M":
        return "", "", ""  # a combining mark: part of the letter before it
    return " ", kind if kind != "silent" else "", ""


@lru_cache(maxsize=4096)
def classify(ch: str) -> tuple[str, str]:
    """('emoji'|'symbol'|'script'|'silent', script name) for a character outside the alphabet."""
    code = ord(ch)
    if 0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF:
        if 0x1F3FB <= code <= 0x1F3FF:  # skin-tone modifiers belong to the emoji before them
            return "silent", ""
        return "emoji", ""
    category = unicodedata.category(ch)
    if category[0] == "L" or (category[0] == "N" and not ch.isascii()):
        return "script", _script_name(ch)
    if category[0] == "S" or 0xE000 <= code <= 0xF8FF:
        return "symbol", ""
    return "silent", ""  # punctuation, spaces, combining marks: no word is lost


@lru_cache(maxsize=512)
def _script_name(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if name.startswith("CJK"):
        return "rare Chinese characters"
    if name.startswith(("LATIN", "MODIFIER LETTER")):
        return "unusual Latin letters"
    word = name.split(" ")[0] if name else "unknown"
    return {"HANGUL": "Korean", "HIRAGANA": "Japanese kana", "KATAKANA": "Japanese kana"}.get(
        word, word.title()
    )


def scan_drops(text: str, drops: Drops) -> None:
    """Count what ``normalize`` would drop from ``text`` in its first pass, without rewriting it."""
    for ch in _SPECIAL.findall(text):
        _, kind, script = basic_form(ch)
        if kind:
            drops.count(kind, script)


# --- links and abbreviations ----------------------------------------------------------------------


def _links(text: str, read_urls: str, drops: Drops) -> str:
    if "@" in text:
        text = _EMAIL.sub(lambda m: f" {spoken_address(m.group(0))} ", text)
    if "://" in text or "www." in text.lower():
        text = _URL.sub(lambda m: _spoken_url(m.group(0), read_urls, drops), text)
    return text


def _spoken_url(url: str, read_urls: str, drops: Drops) -> str:
    if read_urls == "drop":
        drops.links += 1
        return " "
    host = re.sub(r"^(?:[a-z]+://)?(?:www\.)?", "", url.rstrip(".,;:!?)"), flags=re.IGNORECASE)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0]
    return f" {spoken_address(host)} "


def spoken_address(address: str) -> str:
    """'john.doe@example.com' → 'john dot doe at example dot com' (digits are spelled later)."""
    address = address.replace("@", " at ").replace(".", " dot ").replace("_", " underscore ")
    return " ".join(address.replace("-", " ").split())


def _expand_abbreviations(text: str) -> str:
    """Mr. → Mister, e.g. → for example: read as words, and no longer mistaken for sentence ends."""
    if "." not in text:
        return text
    pieces: list[str] = []
    done = 0
    for match in _EN_ABBREVIATION.finditer(text):
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
    if short in _BEFORE_CAPITAL and not (following[:1] == " " and next_letter.isupper()):
        return None  # a title only before a name: "Dr. Watson", not "the road ends at St."
    ends_sentence = (
        not following or following[0] == SEPARATOR or following[:1] == " " and next_letter.isupper()
    )
    # "and so on, etc." ends a sentence: its period stays; "etc. and" goes on
    return _EN_ABBREVIATIONS[short] + ("." if ends_sentence and short not in _BEFORE_CAPITAL else "")


# --- what is left after the readers ---------------------------------------------------------------

_LEFTOVER = re.compile(rf"[^A-Za-z{CJK_RANGE} ，。！？、；：,.!?;:'{ELLIPSIS}{DASH_MARK}{SEPARATOR}]+")


# What may be left after the readers: the first pass mapped every other character.
_POSSIBLE_LEFTOVERS = frozenset('"#$%&()*+-/<=>@[\\]^_`{|}~' + SQUARED + CUBED) | frozenset(
    ch for ch in _SPOKEN_SYMBOLS if not ch.isascii()
)


def _leftovers(text: str, drops: Drops, present: frozenset[str]) -> str:
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


# --- punctuation and spacing ---------------------------------------------------------------------

_MARKS = f"，。！？、；：,.!?;:{ELLIPSIS}{DASH_MARK}"
_MARK_RUN = re.compile(rf" [{_MARKS}](?: ?[{_MARKS}])*|[{_MARKS}](?: ?[{_MARKS}])+|[{ELLIPSIS}{DASH_MARK}]")
_LONE_APOSTROPHE = re.compile(r"'(?<![A-Za-z]')|'(?![A-Za-z])")
_SPACES = re.compile(r"  +")
_SPACE_BETWEEN_CJK = re.compile(
    rf" (?<=[{CJK_RANGE}{_KEPT_CJK_PUNCTUATION}] )(?=[{CJK_RANGE}{_KEPT_CJK_PUNCTUATION}])"
)
_HALF_WIDTH_AFTER_CJK = re.compile(rf"[,.!?;:](?<=[{CJK_RANGE}{_KEPT_CJK_PUNCTUATION}].)")
_STRENGTH = {
    "?": 6,
    "？": 6,
    "!": 5,
    "！": 5,
    ".": 4,
    "。": 4,
    ";": 3,
    "；": 3,
    ":": 2,
    "：": 2,
    ",": 1,
    "，": 1,
    "、": 1,
    DASH_MARK: 0,
}
_FULL_WIDTH = {",": "，", ".": "。", "!": "！", "?": "？", ";": "；", ":": "："}
_HALF_WIDTH = {value: key for key, value in _FULL_WIDTH.items()}
_LEADING = "，。！？、；：,.!?;: "


def tidy(text: str) -> str:
    """One mark per pause (the strongest), in the width of the text around it; single spaces."""
    if "'" in text:
        text = _LONE_APOSTROPHE.sub(" ", text)
    if ELLIPSIS in text or DASH_MARK in text:
        text = _resolve_pauses(text)
    if "  " in text:
        text = _SPACES.sub(" ", text)
    if _MARK_TROUBLE.search(text):  # "word ," or "?!": one scan rather than a test per pair
        text = _MARK_RUN.sub(_one_mark, text)
        if "  " in text:
            text = _SPACES.sub(" ", text)
    if not text.isascii():  # Chinese somewhere: its marks, then its spacing
        text = _HALF_WIDTH_AFTER_CJK.sub(lambda m: _FULL_WIDTH[m.group(0)], text)
        if " " in text:
            text = _SPACE_BETWEEN_CJK.sub("", text)
    return text


_RUN_CHARACTERS = frozenset(_MARKS + " ")
_MARK_TROUBLE = re.compile(rf"[ {_MARKS}] ?[{_MARKS}]")


def _resolve_pauses(text: str) -> str:
    """Each dash, bracket, line break or ellipsis, with the marks and spaces around it, becomes one mark.

    Found with str.find rather than a regex: they are few, and a regex pass would cost a scan per chapter.
    """
    pieces: list[str] = []
    done = 0
    upcoming = {mark: text.find(mark) for mark in (ELLIPSIS, DASH_MARK)}
    while True:
        found = [position for position in upcoming.values() if position >= 0]
        if not found:
            break
        at = min(found)
        start, end = at, at + 1
        while start > done and text[start - 1] in _RUN_CHARACTERS:
            start -= 1
        while end < len(text) and text[end] in _RUN_CHARACTERS:
            end += 1
        pieces.append(text[done:start])
        pieces.append(_pause(text, start, end))
        done = end
        for mark, position in upcoming.items():  # only marks swallowed by this run need looking for again
            if 0 <= position < end:
                upcoming[mark] = text.find(mark, end)
    pieces.append(text[done:])
    return "".join(pieces)


def _one_mark(match: re.Match[str]) -> str:
    return _pause(match.string, match.start(), match.end())


def _pause(string: str, start: int, end: int) -> str:
    """The one mark (with its space) that replaces string[start:end], a run of marks and spaces."""
    run = string[start:end]
    before_index = start
    while before_index > 0 and string[before_index - 1] == " ":
        before_index -= 1
    before = string[before_index - 1] if before_index > 0 else ""
    after_index = end
    while after_index < len(string) and string[after_index] == " ":
        after_index += 1
    after = string[after_index] if after_index < len(string) else ""
    before = "" if before == SEPARATOR else before
    after = "" if after == SEPARATOR else after
    mark = _strongest(run.replace(" ", ""), after)
    if not mark:
        return " "
    if before and not before.isascii() or (not before and after and not after.isascii()):
        return _FULL_WIDTH.get(mark, mark)
    mark = _HALF_WIDTH.get(mark, mark)
    spaced = run != mark
    return f"{mark} " if after and spaced else mark


def _strongest(marks: str, after: str) -> str:
    best, best_strength = "", -1
    for mark in marks:
        if mark == ELLIPSIS:  # "so..." before a capital or the end: a full stop; inside a sentence: a pause
            mark = "." if not after or after.isupper() or not after.isascii() else ","
        strength = _STRENGTH.get(mark, 0)
        if strength > best_strength:
            best, best_strength = mark, strength
    if best == DASH_MARK:
        return "," if after else ""  # a pause at the very end of a paragraph is nothing
    return best

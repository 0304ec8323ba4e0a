"""A pronunciation lexicon: the words and names the voice gets wrong, and what to say instead.

It is applied to the book's text before anything else of the text stage, so an entry wins over the
readers of numbers, symbols and abbreviations ('R2-D2 = Artoo Detoo'); what it says is then read
as the book's own text is. The words the book writes stay as they are (read-along, subtitles).

The format, for the user's files (``--lexicon FILE``, ``$TTS_JOBS_DATA_DIR/lexicon.txt``)::

    # a comment; blank lines are skipped
    Hermione = Her-my-oh-nee
    nginx = engine x
    US = you ess
    重庆 = 虫庆
    Tolkien<TAB>Toll-keen

- One entry a line: what the book writes, ``=`` (or a tab), what to say. Spaces around both
  sides do not count; the first ``=`` or tab separates. UTF-8.
- Whole words only: ``Ron`` leaves ``Ronald`` alone. Chinese is written without spaces, so an
  entry's Chinese edge matches inside a run of Chinese.
- An entry in lower case matches any case (``nginx`` also changes ``NGINX``); an entry with a
  capital letter matches that spelling only (``US`` leaves ``us`` alone).
- A phrase matches across any spaces or a line break; a straight apostrophe matches a curly one.
- Where entries overlap the longest wins; for the same written form the later one wins (the book's
  own, then the data directory's ``lexicon.txt``, then ``--lexicon FILE``).
- An empty right side leaves the words out.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.errors import OptionError
from pipeline.text.marks import SEPARATOR

Entry = tuple[str, str]  # (what the book writes, what to say)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_LETTER = rf"[^\W_{_CJK}]"  # a letter or digit of a word written with spaces (not CJK)
_TOKENS = re.compile(rf"{_LETTER}+|[{_CJK}]")
_IS_LETTER = re.compile(_LETTER)
_APOSTROPHES = "'’‘ʼ`"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_lexicon(text: str, source: str) -> tuple[Entry, ...]:
    """The entries of a lexicon file's text (``source`` names it in errors).

    Raises:
        OptionError: a line that is no entry, naming the file, the line and the fix.
    """
    entries = []
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tab, equals = line.find("\t"), line.find("=")
        cut = tab if tab >= 0 and (equals < 0 or tab < equals) else equals
        if cut < 0:
            raise OptionError(f"{source} line {number}: {line[:60]!r} has no '=': write it as "
                              "`written = spoken` (a tab also separates)")
        written, spoken = line[:cut].strip(), line[cut + 1:].strip()
        if not written:
            raise OptionError(f"{source} line {number}: nothing before the '=': write it as "
                              "`written = spoken`, the word as the book has it first")
        entries.append((written, _CONTROL.sub(" ", spoken)))
    return tuple(entries)


@dataclass(frozen=True)
class Lexicon:
    """Entries applied in one pass, the longest first; see the module for the rules."""

    entries: tuple[Entry, ...] = ()

    @classmethod
    def merged(cls, *groups: Iterable[Entry]) -> Lexicon:
        """One lexicon of ``groups`` in order: for the same written form the later entry wins."""
        chosen: dict[str, Entry] = {}
        for group in groups:
            for written, spoken in group:
                key = " ".join(unicodedata.normalize("NFC", written).split())
                chosen.pop(key, None)  # the later entry also takes the later place
                chosen[key] = (key, spoken)
        return cls(tuple(chosen.values()))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def apply(self, texts: Sequence[str]) -> list[str]:
        """``texts`` (a chapter's title and paragraphs) with every entry replaced."""
        if not self.entries or not texts:
            return list(texts)
        joined = SEPARATOR.join(texts)
        if joined.count(SEPARATOR) != len(texts) - 1:  # the book holds the separator itself
            return [self.apply([text])[0] for text in texts]
        if not joined.isascii():
            joined = unicodedata.normalize("NFC", joined)
        pattern, spoken = self._pattern_for(frozenset(_TOKENS.findall(joined.lower())))
        if pattern is None:
            return list(texts)
        return pattern.sub(lambda match: spoken[match.lastindex or 0], joined).split(SEPARATOR)

    def _pattern_for(self, tokens: frozenset[str]) -> tuple[re.Pattern[str] | None, dict[int, str]]:
        """One alternation of the entries that may occur where ``tokens`` (the text's words and
        Chinese characters) do, each in a group of its own; and what each group's entry says."""
        chosen = [entry for entry, key in zip(self._by_length, self._keys) if key is None or key in tokens]
        if not chosen:
            return None, {}
        return _compiled(tuple(_piece(written) for written, _ in chosen)), {
            number: spoken for number, (_, spoken) in enumerate(chosen, start=1)}

    @functools.cached_property
    def _by_length(self) -> list[Entry]:
        return sorted(self.entries, key=lambda entry: -len(entry[0]))

    @functools.cached_property
    def _keys(self) -> list[str | None]:
        """Each entry's first word (or Chinese character) in lower case; None: it starts otherwise."""
        keys: list[str | None] = []
        for written, _ in self._by_length:
            first = _TOKENS.match(written.lower())
            keys.append(first.group() if first else None)
        return keys


@functools.lru_cache(maxsize=256)
def _compiled(pieces: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"({piece})" for piece in pieces))


def _piece(written: str) -> str:
    """The pattern of one entry: its words as written (spaces and apostrophes loosely), case
    ignored for an entry in lower case, and bounded where it begins or ends with a letter."""
    parts = []
    for ch in written:
        if ch.isspace():
            if not parts or parts[-1] != r"\s+":
                parts.append(r"\s+")
        elif ch in _APOSTROPHES:
            parts.append(f"[{_APOSTROPHES}]")
        else:
            parts.append(re.escape(ch))
    body = "".join(parts)
    if written == written.lower():
        body = f"(?i:{body})"
    if _IS_LETTER.match(written[0]):
        body = f"(?<!{_LETTER}){body}"
    if _IS_LETTER.match(written[-1]):
        body = f"{body}(?!{_LETTER})"
    return body

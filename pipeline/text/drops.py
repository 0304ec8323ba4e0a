"""What normalisation leaves out on purpose and counts, and which kind of drop a character is."""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache


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

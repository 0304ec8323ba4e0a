"""Options of the text stage."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.text.lexicon import Lexicon


@dataclass(frozen=True)
class TextOptions:
    """How chapter text becomes speakable sentences.

    Sentence length is measured in Latin characters; one CJK character costs
    ``max_chars / max_cjk_chars`` of them, so a sentence of pure Chinese holds at most ``max_cjk_chars``
    characters. Both defaults keep a sentence near 12-15 s of speech, well under ChatTTS's ~30 s.
    """

    max_chars: int = 100  # longest sentence, in Latin characters
    max_cjk_chars: int = 60  # longest sentence of pure CJK text
    min_chars: int = 12  # shorter sentences are merged with a neighbour of the same paragraph
    language: str = ""  # "zh" or "en" to force how numbers and symbols are read; "" decides per sentence
    read_urls: str = "domain"  # "domain": a link is read as its site ("example dot com"); "drop": left out
    fail_on_unsupported_script: bool = False  # BookError instead of a warning for e.g. Cyrillic or kana
    written: bool = False  # find each sentence's words as the book writes them (Sentence.written)
    lexicon: Lexicon = Lexicon()  # pronunciations, applied before anything else (``lexicon``)
    dialogue: bool = False  # cut at quotations and mark the sentences inside them (``dialogue``)
    book_language: str = ""  # the book's BCP-47 language: its quotation marks

    def __post_init__(self) -> None:
        if self.max_chars < 20 or self.max_cjk_chars < 10:
            raise ValueError("max_chars must be at least 20 and max_cjk_chars at least 10")
        if self.read_urls not in ("domain", "drop"):
            raise ValueError("read_urls must be 'domain' or 'drop'")
        if self.language not in ("", "zh", "en"):
            raise ValueError("language must be '', 'zh' or 'en'")

    @property
    def cjk_weight(self) -> float:
        return self.max_chars / self.max_cjk_chars

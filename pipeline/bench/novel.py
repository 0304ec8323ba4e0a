"""A generated long novel as EPUB, for the ingestion benchmark: Zipf-distributed words, one sentence
in twelve holding a number, date, money, abbreviation, quotation or dash, one Chinese chapter in
five (some with dates), so that the archive holds more than twice its size in text."""

from __future__ import annotations

import itertools
import random
import zlib
from pathlib import Path

from pipeline.bench.books import write_epub

_SYLLABLES = [
    "ba", "be", "bi", "bo", "bu", "da", "de", "di", "do", "du", "ka", "ke", "ki", "ko", "ku", "la", "le", "li", "lo", "lu",
    "ma", "me", "mi", "mo", "mu", "na", "ne", "ni", "no", "nu", "ra", "re", "ri", "ro", "ru", "sa", "se", "si", "so", "su",
    "ta", "te", "ti", "to", "tu", "va", "ve", "vi", "vo", "vu", "an", "en", "in", "on", "un", "ar", "er", "ir", "or", "ur",
    "st", "th", "sh", "ch",
]
_HANZI = [chr(code) for code in range(0x4E00, 0x4E00 + 3500)]
_EXTRAS = [
    "Mr. Smith", "Dr. Jones", "in 1984", "at 10:30", "$3.50", "45%", "3.5 km", "e.g. this",
    "the 2nd time", "on 2024-03-05", "Chapter IV", "“Yes,” she said.", "— then —", "and so on…",
]


_EXTRA_RATE = 0.08  # sentences holding a number, date, abbreviation, quote or dash: more than most fiction


def _vocabulary(rng: random.Random, size: int = 20_000) -> tuple[list[str], list[float]]:
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size)]
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(size)))  # Zipf, like real prose
    return words, weights


def _english_paragraph(rng: random.Random, words: list[str], weights: list[float]) -> str:
    sentences = []
    for _ in range(rng.randint(2, 8)):
        chosen = rng.choices(words, cum_weights=weights, k=rng.randint(5, 25))
        if rng.random() < _EXTRA_RATE:
            chosen.insert(rng.randrange(len(chosen)), rng.choice(_EXTRAS))
        if rng.random() < 0.3:
            chosen.insert(rng.randrange(1, len(chosen)), ",")
        sentence = " ".join(chosen).replace(" ,", ",")
        sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(".....?!"))
    return " ".join(sentences)


def _chinese_paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 6)):
        clauses = ["".join(rng.choices(_HANZI, k=rng.randint(4, 14))) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            clauses.append(f"{rng.randint(1, 2000)}年{rng.randint(1, 12)}月")
        sentences.append("，".join(clauses) + rng.choice("。。。！？"))
    return "".join(sentences)


def generate(path: Path, size_mb: float, seed: int = 7) -> Path:
    """Write an EPUB of about ``size_mb`` megabytes (compressed) of generated novel."""
    rng = random.Random(seed)
    words, weights = _vocabulary(rng)
    chapters: list[tuple[str, list[str]]] = []
    compressed = 0
    while compressed < size_mb * 1024 * 1024:
        number = len(chapters) + 1
        chinese = number % 5 == 0
        paragraphs = [
            _chinese_paragraph(rng) if chinese else _english_paragraph(rng, words, weights)
            for _ in range(rng.randint(40, 120))
        ]
        title = (
            f"第{number}章 风起"
            if chinese
            else f"Chapter {number}: {' '.join(rng.choices(words, cum_weights=weights, k=3)).title()}"
        )
        chapters.append((title, paragraphs))
        compressed += len(zlib.compress("".join(paragraphs).encode("utf-8"), 6)) + 400
    return write_epub(path, "The Generated Novel", chapters, author="A. Benchmark")

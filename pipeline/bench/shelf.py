"""The books the whole-run measurements speak: two Markdown books of the engine benchmark's mixed
Chinese/English sentences, or EPUB 3 books of a given number of hours of audio."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline import lengths
from pipeline.bench.books import write_epub
from pipeline.bench.protocol import make_workload
from pipeline.types import GPT_STEPS_PER_SECOND


def write_books(folder: Path, sentences_per_book: int, chapters: int,
                shelf: Sequence[float] = ()) -> tuple[list[Path], float]:
    """Two Markdown books of the same size, mixed Chinese/English, or EPUB 3 books of the ``shelf``'s
    hours. Returns them and their audio cap (s)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shelf:
        books = [write_epub_book(folder / f"shelf_{number + 1}.epub", f"Shelf Book {number + 1}",
                                 f"Author {number + 1}", hours, chapters, seed=2000 + number)
                 for number, hours in enumerate(shelf)]
        return [path for path, _ in books], sum(cap for _, cap in books)
    books, cap_seconds = [], 0.0
    for number, title in enumerate(("Scaling Book A", "Scaling Book B")):
        sentences = make_workload(sentences_per_book, seed=1000 + number)
        path = folder / f"book_{'ab'[number]}.md"
        path.write_text(book_markdown(title, sentences, chapters), encoding="utf-8")
        books.append(path)
        cap_seconds += audio_cap_seconds(sentences)
    return books, cap_seconds


SECONDS_PER_SENTENCE = 4.8  # what the workload's sentences come to on synthetic weights


def write_epub_book(path: Path, title: str, author: str, hours: float, chapters: int,
                    seed: int = 42) -> tuple[Path, float]:
    """An EPUB 3 of about ``hours`` of audio: the workload's sentences, six to a paragraph, in
    ``chapters`` chapters. Returns it and its audio cap (s)."""
    sentences = make_workload(max(chapters, round(hours * 3600 / SECONDS_PER_SENTENCE)), seed=seed)
    per_chapter = -(-len(sentences) // chapters)
    parts = []
    for number in range(chapters):
        body = sentences[number * per_chapter:(number + 1) * per_chapter]
        paragraphs = [" ".join(body[i:i + 6]) for i in range(0, len(body), 6)]
        parts.append((f"Chapter {number + 1}", paragraphs))
    return write_epub(path, title, parts, author=author), audio_cap_seconds(sentences)


def audio_cap_seconds(sentences: Sequence[str]) -> float:
    return sum(lengths.max_new_tokens(s) for s in sentences) / GPT_STEPS_PER_SECOND


def book_markdown(title: str, sentences: list[str], chapters: int, per_paragraph: int = 6) -> str:
    per_chapter = -(-len(sentences) // chapters)
    parts = [f"# {title}\n"]
    for chapter in range(chapters):
        body = sentences[chapter * per_chapter:(chapter + 1) * per_chapter]
        parts.append(f"\n## Chapter {chapter + 1}\n")
        for start in range(0, len(body), per_paragraph):
            parts.append("\n" + " ".join(body[start:start + per_paragraph]) + "\n")
    return "".join(parts)

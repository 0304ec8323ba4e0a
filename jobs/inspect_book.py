"""Inspect: what a book would be read as — metadata, chapters, sentences, estimated duration,
warnings — before any GPU time is spent. Exactly what ingest would record for the same options:
the chapters chosen, the pronunciations applied, the sentences the dialogue voice would read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.choices.options import JobOptions, check_choices
from jobs.submit import validate_book
from pipeline.types import DIALOGUE


def inspect_book(path: Path, options: JobOptions = JobOptions(), with_sentences: bool = False) -> dict[str, Any]:
    """The report `tts-jobs inspect` prints (its ``--json`` form). Each chapter has its ``number``
    (as ``--chapters`` and ``--chapter`` take it); its ``sentence_texts`` are what the model is
    given, chapter announcement first, and with a dialogue voice ``dialogue_sentences`` lists the
    positions of those the dialogue voice reads. Raises BookError for a bad book."""
    from pipeline.lengths import estimated_seconds
    from pipeline.text import split_sentences

    check_choices(options)
    book = validate_book(path, options.reading())
    speaking = options.speaking(book)
    chapters = []
    for chapter in book.chapters:
        spoken = split_sentences(chapter, speaking)
        entry: dict[str, Any] = {
            "number": chapter.index + 1, "title": chapter.title, "sentences": len(spoken),
            "characters": sum(len(s.text) for s in spoken),
            "estimated_seconds": round(sum(estimated_seconds(s.text, options.speed) for s in spoken), 1)}
        if with_sentences:
            entry["sentence_texts"] = [s.text for s in spoken]
            if speaking.dialogue:
                entry["dialogue_sentences"] = [n for n, s in enumerate(spoken) if s.role == DIALOGUE]
        chapters.append(entry)
    meta = book.metadata
    return {"title": meta.title, "authors": list(meta.authors), "language": meta.language,
            "publisher": meta.publisher, "date": meta.date, "has_cover": meta.cover is not None,
            "subtitle": meta.subtitle, "series": meta.series, "series_index": meta.series_index,
            "isbn": meta.isbn, "subjects": list(meta.subjects),
            "chapters": chapters, "lexicon": {"book": len(book.lexicon), "user": len(options.lexicon)},
            "warnings": list(book.warnings)}

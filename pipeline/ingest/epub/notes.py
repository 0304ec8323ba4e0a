"""An EPUB's notes and note references, gathered from its documents with book-wide positions and
ids ('member#id'), so that a reference in one file finds its note in another."""

from __future__ import annotations

from dataclasses import replace

from pipeline.ingest.epub.package import href_target
from pipeline.ingest.epub.spine import SpineDocument
from pipeline.ingest.xhtml import Note, NoteRef


def collect_notes(docs: list[SpineDocument]) -> tuple[list[Note], list[NoteRef], str]:
    """Every note and reference of the book, and the title of its notes section ('' if none)."""
    notes: list[Note] = []
    refs: list[NoteRef] = []
    title = ""
    for doc in docs:
        text = doc.text
        title = title or text.notes_title
        for note in text.notes:
            ids = tuple(f"{doc.member}#{element_id}" for element_id in note.ids)
            sources = [
                replace(source, place=replace(source.place, document=doc.member)) if source else None
                for source in note.sources
            ]
            notes.append(Note(ids, note.label, note.paragraphs, doc.offset + note.at, sources))
        for ref in text.note_refs:
            target = href_target(doc.member, ref.target) if ref.target else ""
            refs.append(NoteRef(target, ref.label, doc.offset + ref.at))
    return notes, refs, title

"""Footnotes and endnotes: read where ``--notes`` says, never silently dropped.

The readers set notes aside from the text with the references that point to them (``xhtml``,
``markdown``, ``plain_text_notes`` for Project Gutenberg's ``[Footnote 1: ...]``), and a section
titled as notes ("Notes", "Endnotes", "注释"...) is made of notes too.
Each note belongs to the chapter of its first reference, or, unreferenced, to the chapter it stands in.

- ``end`` (the default): one chapter of notes after the last chapter, in reading order, each note
  under its chapter's title when the notes come from more than one chapter;
- ``chapter``: each chapter's notes after its text;
- ``skip``: left out, and counted in a warning.

Each note is read with its mark: "Note 1. …" (or "注1：…").
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, replace

from pipeline.ingest.chapters import RawBook, RawChapter
from pipeline.ingest.xhtml import Block, Note, NoteRef
from pipeline.text.language import paragraph_language
from pipeline.types import ParagraphSource

_NOTES_TITLE = re.compile(
    r"^(?:(?:end|foot|chapter |author'?s? |translator'?s? |editor'?s? )?notes?|endnotes|footnotes|annotations"
    r"|notes? (?:and references|to the text)|注|注释|注釋|註釋|尾注|脚注|腳註|注解|註解|附注|附註)$",
    re.IGNORECASE,
)
_NOTE_MARK_OPENING = re.compile(r"^\s*[\[(]?(\d{1,3}|[*†‡§¶]+)[\]).:]?\s+(?=\S)")
# Project Gutenberg's plain-text notes: '[Footnote 1: The note.]' or '[1] The note.', and '[1]' in the text.
_TEXT_NOTE = re.compile(r"^\[(?:Footnote\s+)?(\d{1,3}|[A-Z]|\*+)(?::\s*|\]\s+)(.+?)\]?$", re.DOTALL)
_TEXT_REF = re.compile(r"(?<=\S)\[(\d{1,3}|[A-Z]|\*+)\]")


@dataclass
class _Placed:
    note: Note
    label: str
    position: int  # where it is referenced, else where it stands
    owner: int  # the index of the chapter it belongs to
    plain: bool = False  # a paragraph of a notes section that is no note (an opening, a part's title)


def place_notes(raw: RawBook, place: str) -> tuple[list[RawChapter], list[str]]:
    """The book's chapters with its notes placed as ``place`` ('end', 'chapter' or 'skip') says, and
    the warnings that says so."""
    targets = frozenset(ref.target for ref in raw.note_refs if ref.target)
    chapters, from_sections, section = _without_notes_sections(raw.chapters, targets)
    notes = [*raw.notes, *from_sections]
    if not notes:
        return chapters, []
    if place == "skip":
        return chapters, [f"left out {len(notes)} notes (--notes end or --notes chapter reads them)"]
    if not chapters:
        chapters = [RawChapter("", [], at=0)]
    placed = _placed(notes, raw, chapters, len(raw.notes))
    chinese = _chinese([paragraph for note in notes for paragraph in note.paragraphs])
    if place == "chapter":
        for index, chapter in enumerate(chapters):
            own = [item for item in placed if item.owner == index]
            if own:
                read, sources = _read(own, chinese)
                _extend(chapter, ["注释" if chinese else "Notes", *read], [None, *sources])
        return chapters, []
    title = (section.path[-1] if section else "") or raw.notes_title or ("注释" if chinese else "Notes")
    notes_chapter = RawChapter(title, [], (title,), max((chapter.at for chapter in chapters), default=0) + 1)
    if section is not None:  # its heading, where the book shows it, is the one a read-along marks
        notes_chapter.heading, notes_chapter.heading_source = section.heading, section.heading_source
    # notes from a section of their own keep its order and headings; others go under their chapter's title
    grouped = len({item.owner for item in placed}) > 1 and not from_sections
    for index, chapter in enumerate(chapters):
        own = [item for item in placed if item.owner == index]
        if own and grouped and (chapter.path or chapter.title):
            _extend(notes_chapter, [chapter.path[-1] if chapter.path else chapter.title], [None])
        _extend(notes_chapter, *_read(own, chinese))
    if not any(notes_chapter.sources):
        notes_chapter.sources = []
    return [*chapters, notes_chapter], []


def plain_text_notes(blocks: list[Block]) -> tuple[list[Block], list[Note], list[NoteRef]]:
    """The blocks of a plain text without its footnotes, the notes, and the references ('[1]') taken
    out of the text; the blocks unchanged where the text has no footnotes."""
    notes: list[Note] = []
    kept: list[Block] = []
    for block in blocks:
        note = _TEXT_NOTE.match(block.text) if not block.level and block.text.startswith("[") else None
        # '[1] ...' is a note only where a reference to it stands shortly before; else a numbered line
        referenced = note and _TEXT_REF.search(" ".join(earlier.text for earlier in kept[-40:]))
        if note and (block.text.startswith("[Footnote") or referenced):
            notes.append(Note((f"#{note.group(1)}",), note.group(1), [note.group(2).strip()], len(kept)))
        else:
            kept.append(block)
    if not notes:
        return blocks, [], []
    labels = {note.label for note in notes}
    refs: list[NoteRef] = []
    for index, block in enumerate(kept):
        if "[" in block.text:
            for match in _TEXT_REF.finditer(block.text):
                if match.group(1) in labels:
                    refs.append(NoteRef(f"#{match.group(1)}", match.group(1), index))
            text = _TEXT_REF.sub(lambda m: "" if m.group(1) in labels else m.group(0), block.text)
            kept[index] = Block(text, block.level)
    return kept, notes, refs


def _extend(chapter: RawChapter, paragraphs: list[str], sources: list[ParagraphSource | None]) -> None:
    """Add paragraphs to ``chapter``, and their sources where its paragraphs' are known."""
    if len(chapter.sources) == len(chapter.paragraphs):
        chapter.sources = [*chapter.sources, *sources]
    chapter.paragraphs = [*chapter.paragraphs, *paragraphs]


def is_notes_title(title: str) -> bool:
    return bool(_NOTES_TITLE.match(" ".join(title.split()).strip(" .:：")))


def _without_notes_sections(
    chapters: list[RawChapter], targets: frozenset[str] = frozenset()
) -> tuple[list[RawChapter], list[Note], RawChapter | None]:
    """The chapters that are text, the notes of those titled as notes and holding notes (one per
    anchored run of paragraphs, or per paragraph where none is anchored), and the first of those.
    ``targets``: where the book's note references point."""
    kept: list[RawChapter] = []
    notes: list[Note] = []
    section: RawChapter | None = None
    for chapter in chapters:
        own_title = chapter.path[-1] if chapter.path else ""  # a title the book gives, not a file name
        if len(chapters) < 2 or not is_notes_title(own_title) or not _holds_notes(chapter, targets):
            kept.append(chapter)
            continue
        section = section or chapter
        anchored = bool(chapter.anchors)
        for number, paragraph in enumerate(chapter.paragraphs):
            ids = chapter.anchors.get(number, ())
            source = chapter.sources[number] if number < len(chapter.sources) else None
            if notes and anchored and not ids and notes[-1].at >= chapter.at:
                notes[-1].paragraphs.append(paragraph)  # a note of several paragraphs
                notes[-1].sources.append(source)
                continue
            label, skip = _opening_mark(paragraph)
            if source is not None and skip:
                source = replace(source, place=replace(source.place, start=source.place.start + skip))
            notes.append(Note(ids, label, [paragraph[skip:]], chapter.at + number, [source]))
    return kept, notes, section


def _holds_notes(chapter: RawChapter, targets: frozenset[str]) -> bool:
    """Whether a chapter titled as notes holds them: references point into it, or its paragraphs
    open with marks ('12. ...', '[3] ...'), or it is empty (its notes were set aside as such, and it
    names them); an essay titled 'Footnotes' is read where it stands."""
    if not chapter.paragraphs:
        return True
    if any(target in targets for ids in chapter.anchors.values() for target in ids):
        return True
    marked = sum(1 for paragraph in chapter.paragraphs if _opening_mark(paragraph)[0])
    return marked * 2 >= len(chapter.paragraphs) or marked >= 3


def _opening_mark(paragraph: str) -> tuple[str, int]:
    """'12. The note.' → ('12', 4): its mark, and where the note's words begin."""
    match = _NOTE_MARK_OPENING.match(paragraph)
    return (match.group(1), match.end()) if match else ("", 0)


def _placed(notes: list[Note], raw: RawBook, chapters: list[RawChapter], own_notes: int) -> list[_Placed]:
    """Each note with the chapter it belongs to: its first reference's, else the one it stands in.
    The notes from a section of notes (those after the first ``own_notes``) keep its order."""
    first_ref = {}
    for ref in sorted(raw.note_refs, key=lambda ref: ref.at):
        if ref.target:
            first_ref.setdefault(ref.target, ref)
    starts = [chapter.at for chapter in chapters]
    placed: list[_Placed] = []
    for note in notes:
        ref = next((first_ref[key] for key in note.ids if key in first_ref), None)
        position = ref.at if ref is not None else note.at
        label = note.label or (ref.label if ref is not None else "")
        placed.append(_Placed(note, label, position, 0, plain=not label and ref is None))
    _keep_section_order(placed[own_notes:])
    for item in placed:
        item.owner = max(bisect_right(starts, item.position) - 1, 0)
    # each chapter's notes in the book's own order, as a reader of its notes pages meets them
    placed.sort(key=lambda item: (item.owner, item.note.at))
    return placed


def _keep_section_order(section: list[_Placed]) -> None:
    """A paragraph of a notes section that nothing refers to (its opening, a part's title, a note
    known by its line) is read with the referenced note after it, so the section keeps its order."""
    following = None
    for item in reversed(section):
        if item.plain or item.position == item.note.at:
            item.position = following if following is not None else item.position
        following = item.position
    previous = -1
    for item in section:  # never before the note it follows
        item.position = previous = max(item.position, previous)


def _read(placed: list[_Placed], chinese: bool) -> tuple[list[str], list[ParagraphSource | None]]:
    """Each note's paragraphs, the first opened by its mark; and where they stand in the book."""
    paragraphs: list[str] = []
    sources: list[ParagraphSource | None] = []
    for item in placed:
        label = item.label
        if item.plain:
            opening = ""
        elif chinese:
            opening = f"注{label}：" if label and label[0].isalnum() else "注："
        else:
            opening = f"Note {label}. " if label and label[0].isalnum() else "Note. "
        first, *rest = item.note.paragraphs
        paragraphs.extend([opening + first, *rest])
        own = item.note.sources if len(item.note.sources) == len(item.note.paragraphs) else []
        own = own or [None] * len(item.note.paragraphs)
        if own[0] is not None:
            own = [replace(own[0], prefix=len(opening)), *own[1:]]
        sources.extend(own)
    return paragraphs, sources


def _chinese(paragraphs: list[str]) -> bool:
    found = [paragraph_language(paragraph) for paragraph in paragraphs[:50]]
    return found.count("zh") > len([language for language in found if language]) / 2

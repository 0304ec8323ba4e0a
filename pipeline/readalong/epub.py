"""``<Title>.epub``: the book as an EPUB 3 whose text is highlighted, sentence by sentence, as its
audio plays (media overlays), in any reader that supports them.

The text is the book's own (an EPUB's documents, marked: ``source_epub``) or made from it
(``generated``); each content document with marked sentences gets one SMIL overlay
(``overlays``); each chapter's audio is one AAC file; the package declares them with their
durations and the class readers set on the sentence being read (``package``).
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from pipeline.errors import AssemblyError
from pipeline.ingest.options import IngestOptions
from pipeline.readalong.edition import STYLESHEET, Edition
from pipeline.readalong.generated import generated_edition
from pipeline.readalong.overlays import Clip, chapter_clips, duration, smil_document
from pipeline.readalong.package import Additions, Overlay, add_overlays, relative
from pipeline.readalong.source_epub import source_edition
from pipeline.readalong.timings import BookTimings
from pipeline.temp_files import temporary_sibling
from pipeline.types import Book

_STORED = (".m4a", ".mp3", ".mp4", ".jpg", ".jpeg", ".png", ".gif", ".woff", ".woff2")  # compressed already
_EPOCH = (1980, 1, 1, 0, 0, 0)  # one date for every member: the same book makes the same archive


@dataclass(frozen=True)
class ReadAlongEpub:
    path: Path
    fragments: dict[tuple[int, int], str]  # (chapter, sentence) -> 'document#id' of each marked sentence
    unmarked: int  # sentences with a place in the book that could not be marked (heard in a neighbour's clip)


def write_readalong_epub(
    book: Book,
    timings: BookTimings,
    audio: Sequence[Path],
    out_path: Path,
    *,
    reading: IngestOptions,
    identifier: str,
    narrator: str = "",
) -> ReadAlongEpub:
    """Write the read-along EPUB.

    Args:
        book: the book as ingestion read it (its format says where its text comes from).
        timings: its sentences' timings, with their written words and places.
        audio: each chapter's audio (AAC in MP4), in the order of ``timings.chapters``.
        out_path: the EPUB to write (under a temporary name until complete).
        reading: the options the book was read with (an EPUB is read again with them).
        identifier: the book's identifier for an edition made from TXT, Markdown or HTML.
        narrator: the voice, for ``media:narrator``.

    Raises:
        AssemblyError: the file cannot be written; BookError: the source EPUB cannot be read again.
    """
    if book.format == "epub":
        edition = source_edition(timings, Path(book.source), reading)
    else:
        edition = generated_edition(book, timings, identifier)
    audio_by_chapter = {chapter.index: path for chapter, path in zip(timings.chapters, audio, strict=True)}
    clips: dict[str, list[Clip]] = {}
    audio_members: dict[str, Path] = {}
    for chapter in timings.chapters:
        marked = {
            sentence.index: edition.marked[chapter.index, sentence.index]
            for sentence in chapter.sentences
            if (chapter.index, sentence.index) in edition.marked
        }
        if not marked:
            continue
        member = edition.member(f"audio/chapter_{chapter.index + 1:04d}.m4a")
        audio_members[member] = audio_by_chapter[chapter.index]
        for clip in chapter_clips(chapter, member, marked):
            clips.setdefault(clip.document, []).append(clip)
    overlays, smils = _overlays(edition, clips, list(audio_members))
    stylesheet = edition.member("readalong.css")
    add_overlays(
        edition.package,
        edition.opf_member,
        Additions(tuple(overlays), tuple(audio_members), stylesheet, narrator),
    )
    members = {
        **edition.files,
        edition.opf_member: _package_bytes(edition.package),
        stylesheet: STYLESHEET,
        **smils,
    }
    _write_zip(out_path, members, audio_members)
    fragments = {key: f"{document}#{fragment}" for key, (document, fragment) in edition.marked.items()}
    return ReadAlongEpub(out_path, fragments, edition.unmarked)


def _overlays(
    edition: Edition, clips: dict[str, list[Clip]], audio: list[str]
) -> tuple[list[Overlay], dict[str, bytes]]:
    """One overlay per document with clips, its pars in document order."""
    overlays, smils = [], {}
    for number, document in enumerate(clips, start=1):
        order = {fragment: position for position, fragment in enumerate(edition.order.get(document, []))}
        own = sorted(clips[document], key=lambda clip: order.get(clip.fragment, len(order)))
        smil = edition.member(f"overlays/overlay_{number:04d}.smil")
        hrefs = {member: relative(smil, member) for member in audio}
        smils[smil] = smil_document(own, relative(smil, document), hrefs)
        overlays.append(Overlay(document, smil, duration(own)))
    return overlays, smils


def _package_bytes(root: etree._Element) -> bytes:
    return etree.tostring(root, encoding="utf-8", xml_declaration=True)


def _write_zip(path: Path, members: dict[str, bytes], files: dict[str, Path]) -> None:
    """The EPUB container: ``mimetype`` first and uncompressed, as OCF requires; written under a
    temporary name and renamed when complete."""
    partial = temporary_sibling(path, "partial")
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            archive.writestr(zipfile.ZipInfo("mimetype", _EPOCH), b"application/epub+zip", zipfile.ZIP_STORED)
            for name, data in members.items():
                compression = zipfile.ZIP_STORED if name.lower().endswith(_STORED) else zipfile.ZIP_DEFLATED
                archive.writestr(zipfile.ZipInfo(name, _EPOCH), data, compression)
            for name, source in files.items():
                info = zipfile.ZipInfo(name, _EPOCH)
                with source.open("rb") as reader, archive.open(info, "w") as writer:
                    while chunk := reader.read(1 << 20):
                        writer.write(chunk)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise AssemblyError(
            f"{path}: cannot write the read-along EPUB: {exc.strerror or exc} "
            "(check the disk and permissions)"
        ) from exc

"""Shared by the read-along tests: a book assembled from tone sentences (real ffmpeg), epubcheck,
and readers of what a read-along EPUB holds (overlays, package metadata, marked sentences)."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from pipeline.audio import (
    AssemblyOptions,
    ChapterAudio,
    SentenceAudio,
    assemble_audiobook,
    write_sentence_wav,
)
from pipeline.bench.synthetic_audio import tone_sentence
from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.semantics import BACKLINK, HIDDEN, LINE_NUMBER, NOTE_REF, kind
from pipeline.ingest.xmlsafe import local_name
from pipeline.readalong import ReadAlong, write_readalong
from pipeline.text import TextOptions, split_sentences
from pipeline.types import Book

EPUBCHECK_JAR = Path("/usr/share/java/epubcheck.jar")  # Debian's epubcheck package (scripts/setup)
SMIL = "{http://www.w3.org/ns/SMIL}"
OPF = "{http://www.idpf.org/2007/opf}"
_CLOCK = re.compile(r"^(\d+):(\d{2}):(\d{2})\.(\d{3})$")


@dataclass(frozen=True)
class Assembled:
    book: Book
    read_along: ReadAlong
    outputs: tuple[Path, ...]
    timings: dict  # type: ignore[type-arg]


def assemble(source: Path, root: Path, formats: str, reading: IngestOptions | None = None) -> Assembled:
    """``source`` read, its sentences voiced by tones (each as long as its text), assembled into
    ``formats`` with the read-along outputs, as a job's assembly does."""
    reading = reading or IngestOptions()
    book = read_book(source, reading)
    chapters, by_path = [], {}
    for chapter in book.chapters:
        audio = []
        for sentence in split_sentences(chapter, TextOptions(written=True)):
            path = root / "wav" / f"{chapter.index}_{sentence.index}.wav"
            seconds = 0.15 + 0.008 * len(sentence.text)
            write_sentence_wav(path, tone_sentence(220.0 + 7 * sentence.index, seconds), durable=False)
            audio.append(SentenceAudio(path, sentence.paragraph_index))
            by_path[str(path)] = sentence
        chapters.append(ChapterAudio(chapter.index, chapter.title, tuple(audio)))
    options = AssemblyOptions(formats=tuple(formats.split(",")), narrator="Test Voice")
    out_dir, work_dir = root / "out", root / "work"
    report = assemble_audiobook(chapters, book.metadata, out_dir, work_dir, options)
    read_along = write_readalong(
        book, by_path, report, options, out_dir, reading=reading, identifier="urn:test:book"
    )
    shutil.rmtree(work_dir)
    timings = json.loads(read_along.timings.read_text(encoding="utf-8"))
    return Assembled(book, read_along, report.outputs + read_along.outputs, timings)


def epubcheck(path: Path, report_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    """epubcheck's messages about ``path`` (any severity: usage notes are not reported)."""
    assert EPUBCHECK_JAR.is_file(), "epubcheck is missing: run scripts/setup"
    report = report_dir / f"{path.stem}.epubcheck.json"
    subprocess.run(
        # one short check a JVM: its first compiler alone (C1) and the serial collector take about
        # half the CPU of the defaults (6.4 -> 3.1 s here; the same messages)
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", str(EPUBCHECK_JAR), str(path),
         "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return json.loads(report.read_text(encoding="utf-8"))["messages"]


def clock_ms(value: str) -> int:
    match = _CLOCK.match(value)
    assert match, value
    hours, minutes, seconds, millis = (int(group) for group in match.groups())
    return ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis


@dataclass(frozen=True)
class Par:
    document: str  # the content document's path in the EPUB
    fragment: str
    audio: str  # path in the EPUB
    begin: int  # ms
    end: int


class Epub:
    """A read-along EPUB opened for reading."""

    def __init__(self, path: Path) -> None:
        with zipfile.ZipFile(path) as archive:
            self.names = archive.namelist()
            self.files = {name: archive.read(name) for name in self.names}
        container = etree.fromstring(self.files["META-INF/container.xml"])
        self.opf_member = next(container.iter("{*}rootfile")).get("full-path")
        self.opf = etree.fromstring(self.files[self.opf_member])

    def member(self, base: str, href: str) -> str:
        return posixpath.normpath(posixpath.join(posixpath.dirname(base), href))

    def metas(self, prop: str) -> dict[str, str]:
        """``<meta property=prop>`` values by what they refine ('' for the book)."""
        return {
            meta.get("refines", ""): meta.text
            for meta in self.opf.iter(f"{OPF}meta")
            if meta.get("property") == prop
        }

    def spine(self) -> list[str]:
        """The content documents in reading order."""
        items = {item.get("id"): item.get("href") for item in self.opf.iter(f"{OPF}item")}
        return [
            self.member(self.opf_member, items[ref.get("idref")]) for ref in self.opf.iter(f"{OPF}itemref")
        ]

    def overlays(self) -> dict[str, tuple[str, str]]:
        """overlay id -> (its SMIL's path, the content document's path)."""
        items = {item.get("id"): item for item in self.opf.iter(f"{OPF}item")}
        return {
            item.get("media-overlay"): (
                self.member(self.opf_member, items[item.get("media-overlay")].get("href")),
                self.member(self.opf_member, item.get("href")),
            )
            for item in items.values()
            if item.get("media-overlay")
        }

    def pars(self, smil: str) -> list[Par]:
        root = etree.fromstring(self.files[smil])
        found = []
        for par in root.iter(f"{SMIL}par"):
            text, audio = par.find(f"{SMIL}text"), par.find(f"{SMIL}audio")
            document, _, fragment = text.get("src").partition("#")
            found.append(
                Par(
                    self.member(smil, document),
                    fragment,
                    self.member(smil, audio.get("src")),
                    clock_ms(audio.get("clipBegin")),
                    clock_ms(audio.get("clipEnd")),
                )
            )
        return found

    def document(self, member: str) -> etree._Element:
        return etree.fromstring(self.files[member])


def read_words(element: etree._Element) -> str:
    """The words of ``element`` a listener hears: without note marks, line numbers, hidden text."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and kind(child, local_name(child), False) not in (
            NOTE_REF,
            LINE_NUMBER,
            HIDDEN,
            BACKLINK,
        ):
            parts.append(read_words(child))
        parts.append(child.tail or "")
    return "".join(parts)


def shown_text(root: etree._Element) -> str:
    """All the text a reader sees in a document, white space folded."""
    body = next(child for child in root if local_name(child) == "body")
    return " ".join("".join(body.itertext()).split())


def duration_ms(path: Path) -> float:
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return 1000 * float(json.loads(result.stdout)["format"]["duration"])

"""The read-along EPUB: valid for epubcheck, and its overlays true to the audio and the text.

Real parts: the books are read by the real readers, voiced by tones of the sentences' lengths,
assembled by real ffmpeg, and checked by the real epubcheck (Debian's package, from scripts/setup).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipeline.audio.aac import FRAME
from pipeline.ingest import IngestOptions
from pipeline.types import SAMPLE_RATE
from tests.books import (
    SAMPLE_CHAPTERS,
    SAMPLE_ZH_CHAPTERS,
    custom_epub,
    endnotes_epub,
    poetry_epub,
    write_epub,
    write_txt,
    xhtml_document,
)
from tests.readalong_helpers import Epub, assemble, clock_ms, duration_ms, epubcheck, read_words, shown_text
from tests.test_audio_m4b import tiny_png

FRAME_MS = 1000 * FRAME / SAMPLE_RATE


def markdown_book(path: Path) -> Path:
    chapters = "\n\n".join(
        f"## {title}\n\n" + "\n\n".join(paragraphs) for title, paragraphs in SAMPLE_CHAPTERS
    )
    text = (
        f"---\ntitle: The Markdown Book\nauthor: Ann Author\nlang: en\ndate: 2021-04-05\n---\n\n"
        f"# The Markdown Book\n\n{chapters}\n\n## Chapter III: Notes\n\n"
        "The *last* chapter has a footnote[^1] and **bold** words.\n\n[^1]: The footnote, read at the end.\n"
    )
    path.write_text(text, encoding="utf-8")
    return path


def nested_epub(path: Path) -> Path:
    """EPUB 3: parts and chapters nested in the nav, images, a cover, an emphasis that two sentences
    share, a footnote and margin line numbers."""
    one = (
        "<h2>Chapter 1</h2><p>It began in 1998. <em>Nobody knew it then. Everyone</em> knows it now.</p>"
        '<figure><img src="../images/figure.png" alt="A red square"/>'
        "<figcaption>Figure 1. A red square, 2 pixels wide.</figcaption></figure>"
        '<p>See the note<a epub:type="noteref" href="#fn1" id="r1">1</a> below, Dr. Who said.</p>'
        '<aside epub:type="footnote" id="fn1"><p>The note says hello.</p></aside>'
    )
    two = "<h2>Chapter 2</h2><p>“Quoted,” she said. “Quite so.” Then 3 cats left.</p>"
    three = (
        '<h2>Chapter 3</h2><div class="line">Shall I compare thee to a summer’s day?</div>'
        '<div class="line">Thou art more lovely and more temperate.<span class="linenum">2</span></div>'
    )
    documents = [
        ("text/part1.xhtml", xhtml_document("<h1>Part One</h1>", title="Part One")),
        ("text/c1.xhtml", xhtml_document(one, title="Chapter 1")),
        ("text/c2.xhtml", xhtml_document(two, title="Chapter 2")),
        ("text/part2.xhtml", xhtml_document("<h1>Part Two</h1>", title="Part Two")),
        ("text/c3.xhtml", xhtml_document(three, title="Chapter 3")),
    ]
    nav = (
        '<ol><li><a href="text/part1.xhtml">Part One</a><ol><li><a href="text/c1.xhtml">Chapter 1</a></li>'
        '<li><a href="text/c2.xhtml">Chapter 2</a></li></ol></li><li><a href="text/part2.xhtml">Part Two</a>'
        '<ol><li><a href="text/c3.xhtml">Chapter 3</a></li></ol></li></ol>'
    )
    images = [
        '<item id="figure" href="images/figure.png" media-type="image/png"/>',
        '<item id="cover" href="images/cover.png" media-type="image/png" properties="cover-image"/>',
    ]
    return custom_epub(
        path,
        documents,
        nav=nav,
        title="Parts and Pictures",
        extra_manifest=images,
        extra_members={"OEBPS/images/figure.png": tiny_png(), "OEBPS/images/cover.png": tiny_png()},
    )


def epub2_book(path: Path) -> Path:
    """EPUB 2: an NCX with nested points, XHTML 1.1 documents, OPF 2 metadata attributes."""
    head = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
        '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml" '
        'xml:lang="en"><head><title>{t}</title></head><body><h1>{t}</h1>{b}</body></html>\n'
    )
    documents = [
        (f"chapter{n}.xhtml", head.format(t=title, b="".join(f"<p>{p}</p>" for p in paragraphs)))
        for n, (title, paragraphs) in enumerate(SAMPLE_CHAPTERS, start=1)
    ]
    ncx = (
        '<navPoint id="p1" playOrder="1"><navLabel><text>Book</text></navLabel>'
        '<content src="chapter1.xhtml"/>'
        + "".join(
            f'<navPoint id="c{n}" playOrder="{n}"><navLabel><text>{title}</text></navLabel>'
            f'<content src="chapter{n}.xhtml"/></navPoint>'
            for n, (title, _) in enumerate(SAMPLE_CHAPTERS, start=1)
        )
        + "</navPoint>"
    )
    metadata = (
        '<dc:contributor opf:role="nrt" opf:file-as="Reader, A.">A. Reader</dc:contributor>'
        '<dc:date opf:event="publication">2001</dc:date>'
        '<dc:date opf:event="modification">2002-01-01</dc:date>'
    )
    return custom_epub(path, documents, ncx=ncx, version=2, title="An Old Book", extra_metadata=metadata)


BOOKS = {
    "markdown": lambda d: markdown_book(d / "book.md"),
    "epub3-nested-images": lambda d: nested_epub(d / "book.epub"),
    "epub2-ncx": lambda d: epub2_book(d / "book.epub"),
    "chinese-epub": lambda d: write_epub(d / "book.epub", "中文书", SAMPLE_ZH_CHAPTERS, language="zh"),
    "chinese-txt": lambda d: write_txt(d / "book.txt", "中文小说", SAMPLE_ZH_CHAPTERS),
}


@pytest.fixture(scope="module", params=list(BOOKS))
def made(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp(request.param)
    assembled = assemble(BOOKS[request.param](root), root, "m4b,epub")
    [epub] = [path for path in assembled.outputs if path.suffix == ".epub"]
    return assembled, epub, Epub(epub), root


def test_epubcheck_finds_nothing_wrong(made) -> None:  # type: ignore[no-untyped-def]
    _, path, _, root = made
    messages = epubcheck(path, root)
    assert [
        (m["severity"], m["ID"], m["message"])
        for m in messages
        if m["severity"] in ("FATAL", "ERROR", "WARNING")
    ] == []


def test_every_marked_sentence_has_one_par_in_reading_order(made) -> None:  # type: ignore[no-untyped-def]
    """One par per marked sentence; each overlay's pars in the order of its document's text, and
    each chapter's sentences in the order they are heard (a note read at the end of the book has
    its par where the note stands)."""
    assembled, _, epub, _ = made
    overlays = sorted(epub.overlays().values(), key=lambda pair: epub.spine().index(pair[1]))
    pars = [par for smil, _ in overlays for par in epub.pars(smil)]
    places = [f"{par.document}#{par.fragment}" for par in pars]
    chapters = [
        [s["epub"] for s in chapter["sentences"] if "epub" in s] for chapter in assembled.timings["chapters"]
    ]
    assert Counter(places) == Counter(place for chapter in chapters for place in chapter)
    for chapter in chapters:
        assert [place for place in places if place in set(chapter)] == chapter
    for smil, document in overlays:
        in_text = epub.document(document).xpath("//*[starts-with(@id, 'ra-')]/@id")
        assert [par.fragment for par in epub.pars(smil)] == in_text
    assert assembled.read_along.unmarked == 0
    timed = [s for chapter in assembled.timings["chapters"] for s in chapter["sentences"]]
    written = [
        s for s in timed if s["written"] and (s["written"].get("place") or assembled.book.format != "epub")
    ]
    assert len(places) == len(written) > 0


def test_clips_play_each_chapter_audio_once_in_order(made) -> None:  # type: ignore[no-untyped-def]
    assembled, path, epub, root = made
    by_audio: dict[str, list] = {}  # type: ignore[type-arg]
    for smil, _ in epub.overlays().values():
        for par in epub.pars(smil):
            by_audio.setdefault(par.audio, []).append(par)
    total = 0
    for audio, pars in by_audio.items():
        pars.sort(key=lambda par: par.begin)
        assert pars[0].begin == 0
        assert all(before.end == after.begin for before, after in zip(pars, pars[1:]))
        extracted = root / Path(audio).name
        extracted.write_bytes(epub.files[audio])
        assert abs(pars[-1].end - duration_ms(extracted)) <= FRAME_MS
        total += pars[-1].end
    durations = epub.metas("media:duration")
    assert sum(clock_ms(v) for k, v in durations.items() if k) == clock_ms(durations[""]) == total
    assert epub.metas("media:active-class") == {"": "-epub-media-overlay-active"}


def test_clips_begin_where_the_timings_put_each_sentence(made) -> None:  # type: ignore[no-untyped-def]
    assembled, _, epub, _ = made
    begins = {
        f"{par.document}#{par.fragment}": par.begin
        for smil, _ in epub.overlays().values()
        for par in epub.pars(smil)
    }
    for chapter in assembled.timings["chapters"]:
        marked = [sentence for sentence in chapter["sentences"] if "epub" in sentence]
        for sentence in marked[1:]:  # the first clip opens the chapter's audio
            assert begins[sentence["epub"]] == (sentence["start"] * 1000 + SAMPLE_RATE // 2) // SAMPLE_RATE


def test_each_fragment_holds_the_sentence_as_written(made) -> None:  # type: ignore[no-untyped-def]
    assembled, _, epub, _ = made
    for chapter in assembled.timings["chapters"]:
        for sentence in chapter["sentences"]:
            if "epub" not in sentence:
                continue
            document, fragment = sentence["epub"].split("#")
            [element] = epub.document(document).xpath("//*[@id=$id]", id=fragment)
            assert " ".join(read_words(element).split()) == " ".join(sentence["written"]["text"].split())


def test_the_documents_show_the_same_text(made, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assembled, _, epub, _ = made
    if assembled.book.format != "epub":
        pytest.skip("its documents are made from the text: nothing to compare them with")
    source = Epub(Path(assembled.book.source))
    for name, data in source.files.items():
        if name.endswith(".xhtml") and name in epub.files and "nav" not in name:
            assert shown_text(epub.document(name)) == shown_text(source.document(name)), name


def test_text_that_is_not_read_gets_no_overlay(tmp_path) -> None:
    """Notes left out, line numbers: not marked, not changed."""
    book = endnotes_epub(tmp_path / "notes.epub")
    assembled = assemble(book, tmp_path, "epub", IngestOptions(notes="skip"))
    epub = Epub(next(p for p in assembled.outputs if p.suffix == ".epub"))
    notes = epub.document("OEBPS/notes.xhtml")
    assert not notes.xpath("//*[starts-with(@id, 'ra-')]")
    assert shown_text(notes) == shown_text(Epub(book).document("OEBPS/notes.xhtml"))
    poem = assemble(poetry_epub(tmp_path / "poem.epub"), tmp_path / "poem", "epub")
    document = Epub(next(p for p in poem.outputs if p.suffix == ".epub")).document("OEBPS/poem.xhtml")
    numbers = document.xpath(
        "//*[@class='linenum' or @class='line-number' or @epub:type='linenum']",
        namespaces={"epub": "http://www.idpf.org/2007/ops"},
    )
    assert len(numbers) == 3 and not any(n.get("id") or n.getparent().get("id") for n in numbers)
    assert shown_text(document) == shown_text(Epub(tmp_path / "poem.epub").document("OEBPS/poem.xhtml"))


def test_an_epub_of_the_book_beside_the_audio_is_never_replaced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / "book.epub", "Kept", SAMPLE_CHAPTERS[1:])
    (tmp_path / "library" / "out").mkdir(parents=True)
    (tmp_path / "library" / "out" / "Kept.epub").write_bytes(book.read_bytes())  # the ebook, kept there
    beside = assemble(book, tmp_path / "library", "epub")
    assert (tmp_path / "library" / "out" / "Kept.epub").read_bytes() == book.read_bytes()
    assert [p.name for p in beside.outputs] == ["Kept.read-along.epub"]
    assemble(book, tmp_path / "own", "epub")
    again = assemble(book, tmp_path / "own", "epub")  # an edition of its own is replaced
    assert sorted(p.name for p in (tmp_path / "own" / "out").glob("*.epub")) == ["Kept.epub"]
    assert [p.name for p in again.outputs] == ["Kept.epub"]

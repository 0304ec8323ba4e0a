"""Read-along editions of scholarly and technical books: every spoken sentence that the book shows
is highlighted (chapter headings and the notes' own heading included), an overlay never takes a
chapter's audio backwards (notes read in another order than their pages hold them), and epubcheck
finds nothing wrong. Real parts, as in test_readalong_epub: tones, ffmpeg, epubcheck."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.readalong.overlays import longest_rising
from tests.books import custom_epub, xhtml_document
from tests.readalong_helpers import Epub, assemble, epubcheck
from tests.test_ingest_scholarly import poem_with_notes


def technical_book(path: Path) -> Path:
    """A code listing (announced where it stands), navigation lines, model numbers, and footnotes
    referenced in the reverse of the order their page holds them."""
    one = (
        "<h1>Setup</h1><p>Then call <code>getElementById()</code> in it.</p><pre><code>x = [64,128]\nprint(x)</code></pre>"
        '<p>Second<a epub:type="noteref" href="#n2">2</a> and first<a epub:type="noteref" href="#n1">1</a>.</p>'
        '<aside epub:type="footnote" id="n1"><p>The first note.</p></aside>'
        '<aside epub:type="footnote" id="n2"><p>The second note.</p></aside>'
        '<div class="familylinks"><p><strong>Parent topic:</strong> <a href="two.xhtml">Use</a></p></div>'
    )
    two = "<h1>Use</h1><p>The GTX 1650 4GB card runs it at 40-75% load.</p>"
    documents = [("one.xhtml", xhtml_document(one)), ("two.xhtml", xhtml_document(two))]
    nav = '<ol><li><a href="one.xhtml">Setup</a></li><li><a href="two.xhtml">Use</a></li></ol>'
    return custom_epub(path, documents, nav=nav, title="A Manual")


BOOKS = {
    "poem-with-notes": lambda d: poem_with_notes(d / "poem.epub"),
    "chinese-poem-with-notes": lambda d: poem_with_notes(d / "poem.epub", language="zh"),
    "technical": lambda d: technical_book(d / "manual.epub"),
}


@pytest.fixture(scope="module", params=list(BOOKS))
def made(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp(request.param)
    assembled = assemble(BOOKS[request.param](root), root, "m4b,epub")
    [epub] = [path for path in assembled.outputs if path.suffix == ".epub"]
    return assembled, epub, Epub(epub), root


def test_every_sentence_the_book_shows_is_highlighted_headings_included(made) -> None:  # type: ignore[no-untyped-def]
    assembled, _, epub, _ = made
    pars = [par for smil, _ in epub.overlays().values() for par in epub.pars(smil)]
    sentences = [s for chapter in assembled.timings["chapters"] for s in chapter["sentences"]]
    shown = [s for s in sentences if s["written"] and s["written"].get("place")]
    assert len(pars) == len(shown) and assembled.read_along.unmarked == 0
    if assembled.book.metadata.title == "The Waste Land":  # every word of the poem and its notes is shown
        assert len(pars) == len(sentences)
    headings = [chapter["sentences"][0] for chapter in assembled.timings["chapters"]]
    shown_headings = [heading for heading in headings if heading in shown]
    assert len(shown_headings) >= 2 and all("epub" in heading for heading in shown_headings)


def test_no_overlay_takes_an_audio_file_backwards(made) -> None:  # type: ignore[no-untyped-def]
    _, _, epub, _ = made
    for smil, _ in epub.overlays().values():
        last: dict[str, int] = {}
        for par in epub.pars(smil):
            assert par.begin >= last.get(par.audio, 0), (smil, par)
            last[par.audio] = par.end


def test_epubcheck_finds_nothing_wrong(made) -> None:  # type: ignore[no-untyped-def]
    _, path, _, root = made
    messages = epubcheck(path, root)
    problems = [(m["severity"], m["ID"], m["message"]) for m in messages]
    assert [problem for problem in problems if problem[0] in ("FATAL", "ERROR", "WARNING")] == []


def test_sentences_read_out_of_their_pages_order_keep_the_longest_run_in_both_orders():
    assert longest_rising([0, 1, 4, 2, 3, 5]) == {0, 1, 2, 3, 5}
    assert longest_rising([3, 2, 1]) in ({3}, {2}, {1})
    assert longest_rising([]) == set()

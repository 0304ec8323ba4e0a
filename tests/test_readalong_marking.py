"""Marking sentences in a book's own XHTML: a ``<span id>`` around each, the text a reader sees
unchanged, and a sentence that cannot be wrapped left alone."""

from __future__ import annotations

from lxml import etree

from pipeline.ingest.xhtml import ExtractOptions, extract_text
from pipeline.ingest.xmlsafe import parse_xhtml
from pipeline.readalong.marking import SentenceMark, mark_sentences
from tests.books import xhtml_document


def _mark(body: str, sentences: list[str]) -> tuple[etree._Element, set[str], str]:
    """Mark ``sentences`` (each found in the first block holding it) in a document of ``body``."""
    root = parse_xhtml(xhtml_document(body).encode()).root
    text = extract_text(root, ExtractOptions(), track=True)
    marks = []
    for number, sentence in enumerate(sentences):
        block = next(b for b in text.blocks if sentence in b.text)
        start = block.text.index(sentence)
        marks.append(SentenceMark(f"s{number}", block.number, start, start + len(sentence)))
    before = "".join(root.find("{*}body").itertext())
    done = mark_sentences(text.origins, marks)
    assert "".join(root.find("{*}body").itertext()) == before  # nothing a reader sees has changed
    return root, done, etree.tostring(root.find("{*}body"), encoding="unicode")


def _text(root: etree._Element, fragment: str) -> str:
    [element] = root.xpath("//*[@id=$id]", id=fragment)
    return "".join(element.itertext())


def test_sentences_sharing_an_emphasis_split_it_in_two_alike_halves() -> None:
    body = '<p>It began. <em class="x" id="e">Nobody knew. Everyone</em> knows.</p>'
    root, done, markup = _mark(body, ["It began.", "Nobody knew.", "Everyone knows."])
    assert done == {"s0", "s1", "s2"}
    assert [_text(root, f"s{n}") for n in range(3)] == ["It began.", "Nobody knew.", "Everyone knows."]
    assert markup.count('class="x"') == 2 and markup.count('id="e"') == 1


def test_a_sentence_at_an_element_edge_moves_out_of_it_whole() -> None:
    root, done, markup = _mark(
        "<p><b>Bold start.</b> Then <i>more</i> text.</p>", ["Bold start.", "Then more text."]
    )
    assert done == {"s0", "s1"} and markup.count("<b>") == 1 and markup.count("<i>") == 1
    assert _text(root, "s1") == "Then more text."


def test_a_sentence_across_table_cells_is_left_unmarked() -> None:
    root, done, _ = _mark("<table><tr><td>One cell. Two</td><td>cells.</td></tr></table>", ["Two, cells."])
    assert done == set()
    assert not root.xpath("//*[@id='s0']")


def test_whitespace_and_line_breaks_inside_a_sentence_are_kept() -> None:
    root, done, _ = _mark("<p>A line\n   that wraps<br/>and breaks.</p>", ["A line that wraps\nand breaks."])
    assert done == {"s0"}
    assert _text(root, "s0") == "A line\n   that wrapsand breaks."  # as the source holds it, the <br> inside
    assert root.xpath("//*[@id='s0']/*[local-name()='br']")

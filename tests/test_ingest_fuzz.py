"""Fuzzing read_book on EPUBs: random bytes and mutated valid books. Nothing but BookError may escape,
and no error may be one of our own bugs (reported as an 'unexpected error')."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from books import epub_members, zip_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import BookError
from pipeline.ingest import INTERNAL_ERROR_MARKER, read_book

# A few seconds per test by default; TTS_FUZZ_EXAMPLES=5000 for a deep run before a release.
FUZZ = settings(
    max_examples=int(os.environ.get("TTS_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
VALID = zip_bytes(
    epub_members(
        "Fuzz",
        [("One", ["Some text, 12 words.", "More."]), ("Two", ["Two's text."])],
        cover=b"\x89PNG\r\n\x1a\n" + b"\x00" * 16,
    )
)
VALID_MEMBERS = epub_members("Fuzz", [("One", ["Some text."]), ("Two", ["More text."])], version=2)


def read_or_refuse(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.epub"
        path.write_bytes(data)
        try:
            book = read_book(path)
        except BookError as error:
            assert INTERNAL_ERROR_MARKER not in str(error), str(error)
            assert "\n" not in str(error)
        else:
            assert book.chapters and all(chapter.paragraphs for chapter in book.chapters)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes):
    read_or_refuse(data)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=12))
def test_flipped_bytes_in_a_valid_epub(flips: list[tuple[int, int]]):
    data = bytearray(VALID)
    for offset, value in flips:
        data[offset] = value
    read_or_refuse(bytes(data))


@FUZZ
@given(st.integers(0, len(VALID)), st.binary(max_size=64))
def test_truncated_or_spliced_valid_epub(cut: int, junk: bytes):
    read_or_refuse(VALID[:cut] + junk)


_XML_MEMBERS = sorted(name for name in VALID_MEMBERS if name.endswith((".xml", ".opf", ".ncx", ".xhtml")))


@FUZZ
@given(st.sampled_from(_XML_MEMBERS), st.data())
def test_mutated_xml_inside_a_valid_zip(member: str, data: st.DataObject):
    original = VALID_MEMBERS[member]
    assert isinstance(original, str)
    position = data.draw(st.integers(0, len(original)))
    action = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    snippet = data.draw(
        st.sampled_from(
            [
                "<",
                ">",
                "&",
                "&amp;",
                "&bogus;",
                "]]>",
                "<!--",
                "\x00",
                "\ufffe",
                '"',
                "<p>",
                "</p>",
                "<!DOCTYPE x [<!ENTITY a 'b'>]>",
                "&#0;",
                "&#xD800;",
                "<?xml version='1.0'?>",
                "é",
                "\u202e",
                'id="x"',
                "#",
                "../",
            ]
        )
    )
    length = data.draw(st.integers(0, 40))
    if action == "delete":
        mutated = original[:position] + original[position + length :]
    elif action == "insert":
        mutated = original[:position] + snippet + original[position:]
    else:
        mutated = original[:position] + snippet + original[position + len(snippet) :]
    members = dict(VALID_MEMBERS)
    members[member] = mutated.encode("utf-8", "surrogatepass")
    read_or_refuse(zip_bytes(members))

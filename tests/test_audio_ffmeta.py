"""FFMETADATA escaping: chapter titles and tags with special characters reach the file intact."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audio.ffmeta import ChapterMark, escape_value, render_ffmetadata
from pipeline.audio.ffmpeg import ffmpeg_binary, probe

HOSTILE = [
    "a=b",
    "semi;colon",
    "#not a comment",
    "back\\slash",
    "two\nlines",
    "[CHAPTER]",
    "; =#\\\n",
    "\\\\x",
]
TRAILING_BACKSLASH = "ends in \\"


def test_escape_value():
    assert escape_value("a=b;c#d\\e\nf") == "a\\=b\\;c\\#d\\\\e\\\nf"
    assert escape_value("crlf\r\nline") == "crlf\\\nline"


def test_render_writes_timebase_and_skips_empty_tags():
    text = render_ffmetadata({"title": "T", "composer": ""}, [ChapterMark("One", 0, 24000)], 24000)
    assert text.splitlines() == [
        ";FFMETADATA1",
        "title=T",
        "[CHAPTER]",
        "TIMEBASE=1/24000",
        "START=0",
        "END=24000",
        "title=One",
    ]


def test_hostile_titles_round_trip_through_ffmpeg(tmp_path):
    titles = [*HOSTILE, TRAILING_BACKSLASH, "last"]
    marks = [ChapterMark(title, n * 2400, (n + 1) * 2400) for n, title in enumerate(titles)]
    meta = tmp_path / "meta.txt"
    meta.write_text(render_ffmetadata({"title": "Book = #1; \\ \nx"}, marks, 24000), encoding="utf-8")
    out = tmp_path / "out.mka"
    subprocess.run(
        [
            ffmpeg_binary(),
            "-nostdin",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-t",
            "1",
            "-i",
            "anullsrc=r=24000:cl=mono",
            "-i",
            str(meta),
            "-map_metadata",
            "1",
            "-map_chapters",
            "1",
            "-c:a",
            "flac",
            str(out),
        ],
        check=True,
        timeout=60,
    )
    info = probe(out)
    # ffmpeg cannot read a value ending in a backslash: it gets a space, and no chapter is lost.
    assert [c["tags"]["title"] for c in info["chapters"]] == [*HOSTILE, TRAILING_BACKSLASH + " ", "last"]
    assert [round(float(c["start_time"]), 3) for c in info["chapters"]] == [
        round(n * 0.1, 3) for n in range(len(titles))
    ]
    assert info["format"]["tags"]["title"] == "Book = #1; \\ \nx"


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=40))
def test_escaped_values_parse_back(value):
    """Unescape the way ffmpeg does (backslash takes the next character literally)."""
    escaped = escape_value(value)
    unescaped, chars = [], iter(escaped)
    for ch in chars:
        assert ch not in "=;#\n", "special characters must never appear unescaped"
        unescaped.append(next(chars) if ch == "\\" else ch)
    assert not escaped.endswith("\\"), "ffmpeg would swallow the line end"
    assert "".join(unescaped) == (value + " " if value.endswith("\\") else value)

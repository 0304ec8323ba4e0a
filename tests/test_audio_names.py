"""Titles never become paths: output names are safe on every common file system."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audio.names import MAX_NAME_BYTES, numbered_names, safe_stem, unique_stems


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Chapter One", "Chapter One"),
        ("../../etc/passwd", "_.._etc_passwd"),
        ('a/b\\c:d*e?f"g<h>i|j', "a_b_c_d_e_f_g_h_i_j"),
        ("..", "Untitled"),
        ("", "Untitled"),
        ("   ", "Untitled"),
        ("CON", "_CON"),
        ("nul.txt", "_nul.txt"),
        ("Com1", "_Com1"),
        ("Console", "Console"),
        ("Ends with dots...", "Ends with dots"),
        ("Line\nbreak\tand\x00null", "Line break and null"),
        ("bidi\u202eevil\u200b", "bidievil"),
        ("Épilogue — 終章", "Épilogue — 終章"),
    ],
)
def test_safe_stem(title, expected):
    assert safe_stem(title) == expected


def test_length_is_capped_in_utf8_bytes_without_splitting_a_character():
    stem = safe_stem("終" * 200)
    assert len(stem.encode("utf-8")) <= MAX_NAME_BYTES
    assert stem == "終" * (MAX_NAME_BYTES // 3)


def test_numbered_names_are_padded_and_unique():
    names = numbered_names(["A"] * 3 + [""] + ["CON"], "mp3")
    assert names == ["01 - A.mp3", "02 - A.mp3", "03 - A.mp3", "04 - Chapter.mp3", "05 - CON.mp3"]
    assert numbered_names([str(n) for n in range(120)], "ogg")[0] == "001 - 0.ogg"


def test_collisions_are_resolved_ignoring_case_and_after_truncation():
    long = "x" * 300
    assert unique_stems(["Title", "title", "TITLE"]) == ["Title", "title (2)", "TITLE (3)"]
    stems = unique_stems([safe_stem(long + "a"), safe_stem(long + "b")])
    assert stems[0] != stems[1] and all(len(s.encode()) <= MAX_NAME_BYTES for s in stems)


@settings(max_examples=300)
@given(st.text(min_size=0, max_size=300))
def test_any_title_gives_a_safe_name(title):
    stem = safe_stem(title)
    assert stem and stem not in {".", ".."}
    assert not any(ch in stem for ch in '/\\:*?"<>|')
    assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in stem)
    assert stem == stem.strip() and not stem.endswith(".") and not stem.startswith(".")
    assert len(stem.encode("utf-8")) <= MAX_NAME_BYTES
    assert stem.split(".")[0].strip().upper() not in {"CON", "PRN", "AUX", "NUL", "COM1", "LPT1"}

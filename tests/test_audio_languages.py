"""The book's language as tags spell it, and as an MP4 track header packs it."""

from __future__ import annotations

import pytest

from pipeline.audio.languages import container_language, iso639_2
from pipeline.audio.mp4_boxes import pack_language


@pytest.mark.parametrize("stated, code", [
    ("en", "eng"), ("en-GB", "eng"), ("EN_us", "eng"), ("zh", "zho"), ("zh-CN", "zho"),
    ("zh-Hans-CN", "zho"), ("chi", "zho"), ("ger", "deu"), ("fr-CA", "fra"), ("yue", "yue"),
    ("cmn-Hans", "cmn"), ("", ""), ("English", ""), ("x-klingon", ""), ("q1", ""), ("e1g", ""),
])
def test_iso639_2_of_what_books_state(stated: str, code: str) -> None:
    assert iso639_2(stated) == code


def test_a_container_says_und_for_a_language_nobody_knows() -> None:
    assert container_language("") == container_language("English") == "und"
    assert container_language("zh-TW") == "zho"


def test_packed_language_is_the_mp4_form() -> None:
    assert pack_language("eng") == 0x15C7  # the bytes every English MP4 track carries
    assert pack_language("und") == 0x55C4
    assert pack_language("zho") == (26 << 10) | (8 << 5) | 15
    with pytest.raises(ValueError):
        pack_language("en")

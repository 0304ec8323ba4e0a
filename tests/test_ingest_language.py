"""A book's language: the one it states, else the one its text is written in."""

from __future__ import annotations

import pytest

from pipeline.ingest.language import book_language, detect_language, with_language
from pipeline.types import BookMetadata, Chapter


def chapters(*paragraphs: str) -> list[Chapter]:
    return [Chapter(index=0, title="", paragraphs=paragraphs)]


CHINESE = "他走进房间，看见桌上放着一封信。信是用英文写的，上面写着 Dear John。"
ENGLISH = "He walked into the room and saw a letter on the table, signed 王小明."


@pytest.mark.parametrize("text, language", [
    (CHINESE, "zh"),
    (ENGLISH, "en"),
    ("Café crème, déjà vu.", "en"),
    ("12345 — 67890 !?", ""),
])
def test_the_text_tells_chinese_from_english(text: str, language: str) -> None:
    assert detect_language(chapters(text)) == language


def test_a_chinese_book_with_english_front_matter_is_chinese() -> None:
    front = "Copyright 2020 by the author. All rights reserved. No part of this book may be reproduced."
    assert detect_language(chapters(front, *[CHINESE] * 5)) == "zh"


def test_only_the_sample_is_read() -> None:
    long_english = " ".join(["word"] * 60_000)  # 300,000 characters: past the sample
    assert detect_language(chapters(CHINESE * 3000, long_english)) == "zh"


@pytest.mark.parametrize("stated, language", [
    ("zh-TW", "zh-TW"), ("zh_CN", "zh_CN"), ("chi", "chi"), (" fr ", "fr"),
    ("", "zh"), ("und", "zh"), ("Chinese", "zh"), ("简体中文", "zh"),
    ("en-GB", "zh"),  # a Chinese text tagged English is Chinese: the text is clearly the other
])
def test_a_stated_language_tag_wins_unless_the_text_is_clearly_the_other(stated: str, language: str) -> None:
    assert book_language(stated, chapters(CHINESE)) == language


def test_metadata_gets_the_detected_language_and_keeps_the_rest() -> None:
    metadata = BookMetadata(title="信", authors=("王",), language="")
    assert with_language(metadata, chapters(CHINESE)) == BookMetadata(title="信", authors=("王",), language="zh")
    stated = BookMetadata(title="信", language="zh")
    assert with_language(stated, chapters(CHINESE)) is stated

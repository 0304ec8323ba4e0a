"""A chapter title in English and Chinese is announced one language at a time: its number in the
language of the words around it, never 'Chapter 二'; a lone Latin name inside a Chinese title
stays in its sentence; the written title still covers what is read (the read-along)."""

from __future__ import annotations

import pytest

from pipeline.text import TextOptions, split_sentences
from pipeline.types import Chapter


def announced(title: str, paragraph: str = "爱丽丝靠着姐姐坐在河岸边。") -> list[str]:
    sentences = split_sentences(Chapter(index=1, title=title, paragraphs=(paragraph,)))
    return [s.text for s in sentences if s.paragraph_index == -1]


@pytest.mark.parametrize(("title", "spoken"), [
    ("Chapter 2: 第二章 兔子洞", ["Chapter two:", "第二章兔子洞"]),
    ("Chapter 2：第二章 兔子洞", ["Chapter two：", "第二章兔子洞"]),
    ("Part IV 第四部", ["Part four", "第四部"]),
    ("第3章 The Return of 1984", ["第三章", "The Return of nineteen eighty four"]),
])
def test_a_title_in_two_languages_reads_each_part_in_its_own(title: str, spoken: list[str]) -> None:
    assert announced(title) == spoken


@pytest.mark.parametrize(("title", "spoken"), [
    ("第五章 Python 入门", ["第五章 Python 入门"]),  # a name among Chinese, one sentence
    ("第二章 兔子洞", ["第二章兔子洞"]),
    ("Chapter 3: The Pool of Tears", ["Chapter three: The Pool of Tears"]),
])
def test_a_title_in_one_language_is_one_announcement(title: str, spoken: list[str]) -> None:
    assert announced(title) == spoken


def test_an_english_book_with_a_chinese_title_reads_it_in_chinese() -> None:
    assert announced("Chapter 12: 第十二章 爱丽丝的证词", "Alice stood up. She was very tired.") == [
        "Chapter twelve:", "第十二章爱丽丝的证词"]


def test_the_parts_of_a_title_are_found_in_the_written_title() -> None:
    title = "Chapter 2: 第二章 兔子洞"
    sentences = split_sentences(Chapter(index=1, title=title, paragraphs=("可是书里既没有图画。",)),
                                TextOptions(written=True))
    spans = [s.written for s in sentences if s.paragraph_index == -1]
    assert [span.text for span in spans if span is not None] == ["Chapter 2:", "第二章 兔子洞"]

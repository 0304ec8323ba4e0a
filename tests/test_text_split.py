"""split_sentences: the contract with the rest of the pipeline, and splitting rules."""

from __future__ import annotations

import pytest

from pipeline.errors import BookError
from pipeline.text import TextOptions, normalize_text, segment_chapter, split_sentences
from pipeline.text.marks import ALLOWED
from pipeline.text.sentences import cost
from pipeline.types import Chapter


def chapter(*paragraphs: str, title: str = "", index: int = 0) -> Chapter:
    return Chapter(index=index, title=title, paragraphs=tuple(paragraphs))


def texts(*paragraphs: str, **options) -> list[str]:
    return [s.text for s in split_sentences(chapter(*paragraphs), TextOptions(**options))]


def test_title_first_with_paragraph_index_minus_one_then_paragraphs():
    sentences = split_sentences(
        chapter(
            "It was night. The end came soon after.",
            "Another paragraph here.",
            title="Chapter 1: Night",
            index=4,
        )
    )
    assert [(s.chapter_index, s.index, s.paragraph_index) for s in sentences] == [
        (4, 0, -1),
        (4, 1, 0),
        (4, 2, 0),
        (4, 3, 1),
    ]
    assert sentences[0].text == "Chapter one: Night"


def test_no_title_sentence_when_the_title_is_empty():
    sentences = split_sentences(chapter("Only text here, nothing else."))
    assert [s.paragraph_index for s in sentences] == [0]


def test_english_abbreviations_initials_and_decimals_do_not_end_sentences():
    assert texts(
        "J. R. R. Tolkien met Prof. Smith in the U.S. at 3.5 miles from home. It rained all day."
    ) == [
        "J. R. R. Tolkien met Professor Smith in the U.S. at three point five miles from home.",
        "It rained all day.",
    ]


def test_question_and_exclamation_marks_end_sentences():
    assert texts("Where are you going tonight? Nowhere at all! I stay home with my cat.") == [
        "Where are you going tonight?",
        "Nowhere at all!",
        "I stay home with my cat.",
    ]


def test_chinese_sentences_keep_their_closing_punctuation():
    assert texts("他走进房间，看了看四周。“有人吗？”没有人回答！他只好离开了房间；天色已经完全黑了。") == [
        "他走进房间，看了看四周。",
        "有人吗？没有人回答！",
        "他只好离开了房间；",
        "天色已经完全黑了。",
    ]


def test_tiny_fragments_merge_with_a_neighbour_in_the_same_paragraph():
    assert texts('"Yes." "No." "Maybe," she said, looking out at the rain.') == [
        "Yes. No. Maybe, she said, looking out at the rain."
    ]


def test_tiny_fragments_never_cross_paragraphs():
    sentences = split_sentences(chapter("Yes.", "No."))
    assert [(s.paragraph_index, s.text) for s in sentences] == [(0, "Yes."), (1, "No.")]


@pytest.mark.parametrize("max_chars,max_cjk", [(100, 60), (40, 20)])
def test_long_sentences_are_cut_below_the_limit(max_chars: int, max_cjk: int):
    english = ", ".join(["the quick brown fox jumps over the lazy dog"] * 12) + "."
    chinese = "，".join(["敏捷的棕色狐狸跳过了懒狗"] * 12) + "。"
    run_on = "word " * 200
    options = TextOptions(max_chars=max_chars, max_cjk_chars=max_cjk)
    for text in (english, chinese, run_on, "字" * 500):
        sentences = split_sentences(chapter(text), options)
        assert len(sentences) > 1
        assert all(cost(s.text, options.cjk_weight) <= max_chars for s in sentences)


def test_long_sentences_are_cut_at_clause_punctuation_first():
    text = (
        "This is a fairly long opening clause that goes on for a while, and this is a second clause "
        "that also goes on for quite a while, and here is the third one to finish it off."
    )
    parts = texts(text)
    assert len(parts) >= 2
    assert all(part.endswith((",", ".")) for part in parts)


def test_sentences_hold_only_characters_chattts_reads():
    sentences = split_sentences(
        chapter(
            "Price: $1,234.56 (about 20%) — “quoted” text… 😀 ★ ©2024 naïve café",
            "价格为￥100，约占20%。《书名》「引用」——结束……",
            title="Ⅳ. Ünïcödé",
        )
    )
    for s in sentences:
        assert ALLOWED.fullmatch(s.text), s.text


def test_paragraph_whose_text_is_only_symbols_gives_no_sentence():
    sentences = split_sentences(chapter("* * *", "Real text here, after the break."))
    assert [(s.index, s.paragraph_index) for s in sentences] == [(0, 1)]


def test_nothing_is_lost_or_doubled_between_normalised_paragraph_and_sentences():
    paragraphs = (
        "Short. " * 30,
        "他说：“好。”" * 20,
        "A very long sentence, " * 30 + "end.",
        "Yes.",
        "1, 2, 3 go!",
    )
    sentences = split_sentences(chapter(*paragraphs))
    for index, paragraph in enumerate(paragraphs):
        joined = "".join(s.text for s in sentences if s.paragraph_index == index)
        assert joined.replace(" ", "") == normalize_text(paragraph).replace(" ", "")


def test_unsupported_script_is_a_warning_by_default_and_an_error_when_strict():
    text = chapter("He said Привет and left.", title="One", index=2)
    result = segment_chapter(text)
    assert [s.text for s in result.sentences][1] == "He said and left."
    assert result.warnings and "Cyrillic 6" in result.warnings[0] and "chapter 3 'One'" in result.warnings[0]
    with pytest.raises(BookError, match="Cyrillic"):
        split_sentences(text, TextOptions(fail_on_unsupported_script=True))


def test_emoji_and_symbols_are_counted_not_silently_lost():
    result = segment_chapter(chapter("Great 😀😀 job ★ team ©"))
    assert result.sentences[0].text == "Great job team"
    assert any("3 emoji" in warning for warning in result.warnings)  # ★ is a dingbat: counted with emoji
    assert any("1 symbols" in warning for warning in result.warnings)


def test_invalid_options_are_refused():
    with pytest.raises(ValueError):
        TextOptions(max_chars=5)
    with pytest.raises(ValueError):
        TextOptions(read_urls="spell")


@pytest.mark.timeout(60)
def test_a_huge_paragraph_is_split_in_linear_time():
    import time

    english = ("word " * 50 + "— ") * 8_000  # ~2 MB, no sentence end at all
    chinese = "字" * 300_000
    for text in (english, chinese):
        started = time.monotonic()
        sentences = split_sentences(chapter(text))
        assert time.monotonic() - started < 20
        assert all(cost(s.text, TextOptions().cjk_weight) <= TextOptions().max_chars for s in sentences)
        assert "".join(s.text for s in sentences).replace(" ", "") == normalize_text(text).replace(" ", "")


def test_chattts_control_tokens_in_the_text_are_not_passed_through():
    texts_out = texts("He said [uv_break] and [laugh] then [speed_9] left.")
    assert texts_out == ["He said, uv break, and, laugh, then, speed nine, left."]
    assert all("[" not in text and "]" not in text for text in texts_out)

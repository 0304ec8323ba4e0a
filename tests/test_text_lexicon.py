"""The pronunciation lexicon: its file format, its matching rules, and its place before every other
step of the text stage."""

from __future__ import annotations

import pytest

from pipeline.errors import OptionError
from pipeline.text import TextOptions, normalize_text, split_sentences
from pipeline.text.lexicon import Lexicon, parse_lexicon
from pipeline.types import Chapter

LEXICON = """\ufeff# names the voice gets wrong
Hermione = Her-my-oh-nee
nginx = engine x
US = you ess
New York Times = the Times
New York = the Big Apple
O'Brien\tOh Bryan
重庆 = 虫庆
"""


def spoken(*paragraphs: str, lexicon: str = LEXICON) -> list[str]:
    options = TextOptions(lexicon=Lexicon.merged(parse_lexicon(lexicon, "test.txt")))
    return [s.text for s in split_sentences(Chapter(0, "", paragraphs), options)]


def test_the_format_comments_tabs_and_a_byte_order_mark() -> None:
    entries = parse_lexicon(LEXICON, "names.txt")
    assert entries[0] == ("Hermione", "Her-my-oh-nee")
    assert ("O'Brien", "Oh Bryan") in entries and len(entries) == 7


@pytest.mark.parametrize("text, problem", [
    ("Hermione Her-my-oh-nee\n", "names.txt line 1: 'Hermione Her-my-oh-nee' has no '='"),
    ("# fine\n = nothing\n", "names.txt line 2: nothing before the '='"),
])
def test_a_line_that_is_no_entry_names_the_file_the_line_and_the_fix(text: str, problem: str) -> None:
    with pytest.raises(OptionError) as error:
        parse_lexicon(text, "names.txt")
    assert str(error.value).startswith(problem) and "written = spoken" in str(error.value)


def test_whole_words_only_and_case_as_the_entry_is_written() -> None:
    assert spoken("Hermione met Hermiones and NGINX ran, but us and US differ.") == [
        "Her my oh nee met Hermiones and engine x ran, but us and you ess differ."]


def test_the_longest_entry_wins_and_phrases_match_across_spaces_and_curly_apostrophes() -> None:
    assert spoken("The New York\nTimes reported that O’Brien loves New York.") == [
        "The the Times reported that Oh Bryan loves the Big Apple."]


def test_chinese_entries_match_inside_a_run_of_chinese() -> None:
    assert spoken("我们明天去重庆旅游。") == ["我们明天去虫庆旅游。"]


def test_an_entry_wins_over_the_readers_of_numbers_and_symbols() -> None:
    """Without it the normaliser reads the year and the droid its own way; with it, the entry is said."""
    text = "In 2001 R2-D2 met C-3PO."
    assert normalize_text(text) == "In two thousand one R two D two met C three PO."
    assert spoken(text, lexicon="2001 = the year two thousand and one\nR2-D2 = Artoo Detoo\nC-3PO = See Threepio") == [
        "In the year two thousand and one Artoo Detoo met See Threepio."]


def test_later_lexicons_win_for_the_same_word() -> None:
    merged = Lexicon.merged([("Hermione", "book's"), ("Ron", "Ronn")], [("Hermione", "yours")])
    assert merged.entries == (("Ron", "Ronn"), ("Hermione", "yours"))
    assert Lexicon().apply(["untouched"]) == ["untouched"]

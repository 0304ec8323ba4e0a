"""Quoted speech for a dialogue voice: which stretches are speech, in each book language's marks,
and sentences that never straddle a quotation's edge."""

from __future__ import annotations

import pytest

from pipeline.text import TextOptions, split_sentences
from pipeline.text.dialogue import split_roles
from pipeline.types import DIALOGUE, NARRATOR, Chapter


def roles(paragraph: str, language: str = "en") -> list[tuple[str, str]]:
    stretches = split_roles(paragraph, language)
    assert "".join(text for _, text in stretches) == paragraph  # nothing lost, nothing moved
    return [(role, text.strip()) for role, text in stretches if text.strip()]


@pytest.mark.parametrize("paragraph, language, speech", [
    ("“Where are you going?” asked Ahab.", "en", "“Where are you going?”"),
    ('"Where are you going?" asked Ahab.', "en", '"Where are you going?"'),
    ("‘Where are you going?’ asked Ahab.", "en", "‘Where are you going?’"),
    ("他问：“你去哪里？”", "zh", "“你去哪里？”"),
    ("他问：「你去哪里？」", "zh", "「你去哪里？」"),
    ("彼は『どこへ行くの？』と聞いた。", "ja", "『どこへ行くの？』"),
    ("« Où allez-vous ? » demanda-t-il.", "fr", "« Où allez-vous ? »"),
    ("„Wohin gehst du?“, fragte er.", "de", "„Wohin gehst du?“"),
    ("»Wohin gehst du?«, fragte er.", "de", "»Wohin gehst du?«"),
    ("”Vart går du?” frågade han.", "sv", "”Vart går du?”"),
])
def test_each_languages_quotation_marks_mark_speech(paragraph: str, language: str, speech: str) -> None:
    assert (DIALOGUE, speech) in roles(paragraph, language)
    assert all(role == NARRATOR for role, text in roles(paragraph, language) if text != speech)


def test_a_said_clause_between_two_quotations_is_the_narrators() -> None:
    assert roles('"Come," she said, "now. Before it rains."') == [
        (DIALOGUE, '"Come,"'), (NARRATOR, "she said,"), (DIALOGUE, '"now. Before it rains."')]


def test_apostrophes_quotes_within_quotes_and_a_speech_running_on() -> None:
    assert roles("“Don’t say ‘never,’ Tom,” she said. The dogs’ bowls were full.") == [
        (DIALOGUE, "“Don’t say ‘never,’ Tom,”"), (NARRATOR, "she said. The dogs’ bowls were full.")]
    # a speech that goes on in the next paragraph leaves its closing mark off
    assert roles("“It was the ’90s, and I was young.") == [(DIALOGUE, "“It was the ’90s, and I was young.")]
    assert roles('He is 6\'2" tall. "Very, very strong," she said.')[0] == (NARRATOR, "He is 6'2\" tall.")


def test_titles_and_scare_quotes_stay_with_the_narrator() -> None:
    assert roles("They sailed on the “Pequod” with a so-called “expert” aboard.") == [
        (NARRATOR, "They sailed on the “Pequod” with a so-called “expert” aboard.")]


@pytest.mark.parametrize("paragraph", [
    'He read "The Old Man and the Sea" twice that summer.',  # a title of many words
    'The so-called "experts," who had never sailed, said nothing.',  # scare quotes, American comma
    'They sang "Happy Birthday, Dear Anna" at the table.',  # a title holding a comma
    '"The Old Man and the Sea" is a short novel.',  # a title opening the paragraph
    'He called the plan "nonsense." Nobody argued.',  # a word quoted at a sentence's end
    "她读了“红楼梦”这本书。",
])
def test_quoted_titles_and_words_inside_a_sentence_are_the_narrators(paragraph: str) -> None:
    assert [role for role, _ in roles(paragraph)] == [NARRATOR]


@pytest.mark.parametrize("paragraph, speech", [
    ('He shouted "Get out of my house!" and slammed the door.', '"Get out of my house!"'),
    ('She said "yes" and left.', '"yes"'),
    ('The sign read "Keep out. This means you." in red letters.', '"Keep out. This means you."'),
    ('She looked up, "Is it you?"', '"Is it you?"'),
    ("他说“你好”。", "“你好”"),
])
def test_speech_inside_a_sentence_is_still_speech(paragraph: str, speech: str) -> None:
    assert (DIALOGUE, speech) in roles(paragraph)


def test_sentences_keep_a_quotations_edges_and_every_word_once_in_order() -> None:
    chapter = Chapter(0, "Chapter One", (
        '"Come," she said, "now. Before it rains." He went out into the long grey evening.',
        "“Who is it?” he asked, and nobody answered the question for a long time.",
    ))
    plain = split_sentences(chapter)
    voiced = split_sentences(chapter, TextOptions(dialogue=True))
    assert [(s.role, s.text) for s in voiced] == [
        (NARRATOR, "Chapter One"),
        (DIALOGUE, "Come,"), (NARRATOR, "she said,"), (DIALOGUE, "now. Before it rains."),
        (NARRATOR, "He went out into the long grey evening."),
        (DIALOGUE, "Who is it?"), (NARRATOR, "he asked, and nobody answered the question for a long time."),
    ]
    assert [s.index for s in voiced] == list(range(len(voiced)))
    assert " ".join(s.text for s in voiced).replace(",", "") == " ".join(s.text for s in plain).replace(",", "")
    assert all(s.role == NARRATOR for s in plain)


def test_the_announcement_is_the_narrators_even_when_quoted() -> None:
    [title, *_] = split_sentences(Chapter(0, "“Call Me Ishmael,” He Said", ("Text.",)), TextOptions(dialogue=True))
    assert title.role == NARRATOR and title.paragraph_index == -1

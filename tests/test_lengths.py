"""Sentence length limits from text: pure logic."""

from __future__ import annotations

from pipeline.lengths import MAX_TOKENS_CAP, estimated_seconds, max_new_tokens, min_new_tokens


def test_longer_text_gets_a_longer_cap() -> None:
    assert max_new_tokens("这是一个比较长的句子，里面有很多字。" * 2) > max_new_tokens("短句。")
    assert max_new_tokens("A much longer English sentence with many words.") > max_new_tokens("Hi.")


def test_chinese_characters_take_longer_than_latin_letters() -> None:
    assert estimated_seconds("你好") > estimated_seconds("hi")


def test_the_floor_stays_below_the_cap_and_short_text_still_gets_two_seconds() -> None:
    for text in ("好。", "Hello there.", "这是一个测试句子。" * 5):
        assert 0 <= min_new_tokens(text) < max_new_tokens(text)
    assert max_new_tokens("好") >= round(2.0 * 46.875)


def test_the_cap_never_exceeds_upstreams_limit() -> None:
    assert max_new_tokens("字" * 5000) == MAX_TOKENS_CAP


def test_plain_ascii_text_is_timed_exactly_as_character_by_character() -> None:
    """The ASCII shortcut gives the very float the per-character sum gives (limits are stored at
    ingest: a book read again must get the same caps), tabs and newlines counting nothing."""
    import random

    rng = random.Random(5)
    alphabet = [chr(i) for i in range(128)]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 600)))
        by_character = 0.0
        for ch in text:
            by_character += 0.0 if ch.isspace() and ch != " " else 0.075
        assert estimated_seconds(text) == by_character
    assert estimated_seconds("a\tb\nc") == estimated_seconds("abc")


def test_the_limits_follow_the_pace_a_slow_voice_gets_more_room() -> None:
    """[speed_N] stretches or compresses speech: the cap and floor move with it, the same text at
    speed 5 keeping the limits it always had."""
    from pipeline.lengths import token_limits

    text = "A sentence of a reasonable length, read at several speeds by the same voice."
    floors, caps = zip(*(token_limits(text, speed) for speed in range(1, 10)))
    assert list(caps) == sorted(caps, reverse=True) and caps[0] > caps[4] > caps[8]
    assert list(floors) == sorted(floors, reverse=True)
    assert token_limits(text, 5) == token_limits(text) == (min_new_tokens(text), max_new_tokens(text))
    assert estimated_seconds(text, 9) < estimated_seconds(text) < estimated_seconds(text, 1)

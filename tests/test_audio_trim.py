"""Trimming takes silence and noise off the edges of a sentence and never cuts into the words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audio.trim import TrimSettings, speech_bounds, trim_silence
from pipeline.types import SAMPLE_RATE

MS = SAMPLE_RATE // 1000
TRIM = TrimSettings()


def tone(ms: int, amplitude: float = 0.3, frequency: float = 200.0) -> np.ndarray:
    return amplitude * 32767 * np.sin(2 * np.pi * frequency * np.arange(ms * MS) / SAMPLE_RATE)


def silence(ms: int, level: float = 0.0, seed: int = 0) -> np.ndarray:
    return level * 32767 * np.random.default_rng(seed).standard_normal(ms * MS)


def pcm(*parts: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.concatenate(parts)), -32768, 32767).astype(np.int16)


def test_leading_and_trailing_silence_go_with_small_margins():
    audio = pcm(silence(500), tone(400), silence(700))
    start, end = speech_bounds(audio)
    assert start == pytest.approx((500 - TRIM.lead_ms) * MS, abs=TRIM.window_ms * MS)
    assert end == pytest.approx((900 + TRIM.tail_ms) * MS, abs=TRIM.window_ms * MS)


def test_pauses_and_near_zero_samples_inside_speech_are_kept():
    # Upstream ChatTTS drops every |x| < 1e-5 anywhere: that deletes zero crossings and quiet gaps.
    words = pcm(tone(300), silence(150), tone(300))
    audio = pcm(silence(300), words, silence(300))
    trimmed = trim_silence(audio)
    start, _ = speech_bounds(audio)
    assert len(trimmed) >= len(words)
    inner = trimmed[300 * MS - start : 300 * MS - start + len(words)]
    np.testing.assert_array_equal(inner, words)  # every sample of the words, silence between them included


def test_hiss_at_the_edges_counts_as_silence():
    audio = pcm(
        silence(400, level=0.0005), tone(300) + silence(300, level=0.0005, seed=1), silence(400, 0.0005, 2)
    )
    start, end = speech_bounds(audio)
    assert abs(start - (400 - TRIM.lead_ms) * MS) <= TRIM.window_ms * MS
    assert abs(end - (700 + TRIM.tail_ms) * MS) <= TRIM.window_ms * MS


def test_an_isolated_click_before_speech_is_trimmed_away():
    click = pcm(tone(5, amplitude=0.8, frequency=2000))
    audio = pcm(silence(100), click, silence(400), tone(300), silence(300))
    start, _ = speech_bounds(audio)
    assert start >= (505 - TRIM.lead_ms) * MS - TRIM.window_ms * MS


def test_a_short_word_alone_survives():
    audio = pcm(silence(300), tone(40), silence(300))
    assert len(trim_silence(audio)) >= 40 * MS


def test_a_quiet_take_is_not_mistaken_for_silence():
    audio = pcm(silence(300), tone(400, amplitude=0.003), silence(300))
    assert len(trim_silence(audio)) >= 400 * MS


def test_pure_silence_becomes_empty():
    assert len(trim_silence(pcm(silence(500)))) == 0
    assert len(trim_silence(pcm(silence(500, level=0.00005)))) == 0


def test_cut_edges_are_faded_so_they_cannot_click():
    audio = pcm(silence(200, level=0.001), tone(300), silence(200, level=0.001, seed=3))
    trimmed = trim_silence(audio).astype(np.int32)
    assert abs(trimmed[0]) <= 2 and abs(trimmed[-1]) <= 2


@settings(max_examples=60, deadline=None)
@given(
    lead=st.integers(0, 400),
    body=st.integers(60, 600),
    tail=st.integers(0, 400),
    amplitude=st.floats(0.01, 0.9),
)
def test_trimming_never_loses_the_sound_itself(lead, body, tail, amplitude):
    audio = pcm(silence(lead), tone(body, amplitude), silence(tail))
    start, end = speech_bounds(audio)
    assert start <= lead * MS and end >= (lead + body) * MS - 1
    assert end - start <= (body + TRIM.lead_ms + TRIM.tail_ms + 2 * TRIM.window_ms) * MS

"""Per-chapter AAC encodes joined into one stream: chapter starts stay where the audio is."""

from __future__ import annotations

import itertools
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audio.aac import (
    FRAME,
    MIN_CUT_PAUSE,
    chapter_starts,
    cut_into_pieces,
    frames_for,
    plan_chapters,
    playable_samples,
)
from pipeline.audio.aac_frames import keep_adts_frames, read_frames
from pipeline.audio.ffmpeg import ffmpeg_binary, probe

SECOND = 24_000


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.integers(SECOND // 2, 600 * SECOND), st.integers(3 * FRAME, 3 * SECOND)),
        min_size=1,
        max_size=40,
    )
)
def test_plan_keeps_every_chapter_start_within_half_a_frame(chapters):
    lengths = [length + silence for length, silence in chapters]
    silences = [silence for _, silence in chapters]
    plans = plan_chapters(lengths, silences)
    starts = chapter_starts([plan.expected_frames for plan in plans])
    pcm_start = 0
    for length, silence, plan, start in zip(lengths, silences, plans, starts, strict=True):
        assert abs(start - pcm_start) <= FRAME // 2
        assert plan.input_samples >= length - silence, "only trailing silence may be cut"
        assert frames_for(plan.input_samples) == plan.expected_frames
        pcm_start += length
    assert playable_samples([p.expected_frames for p in plans]) >= starts[-1] + lengths[-1]


def test_plan_never_cuts_speech_even_without_a_chapter_pause():
    plans = plan_chapters([48_000, 48_000, 48_000], [0, 0, 0])
    assert all(plan.input_samples >= 48_000 for plan in plans)


def test_a_long_chapter_is_cut_in_its_pauses_and_short_ones_stay_whole():
    """A 60-minute chapter with a sentence every 10 s, pieces of 10 minutes: six pieces, each
    ending in a pause long enough to plan with (never at the short ones), back to back."""
    long_chapter = 3600 * SECOND
    points = [(10 * SECOND * k, (FRAME if k % 7 == 0 else 3 * FRAME)) for k in range(1, 360)]
    pieces = cut_into_pieces([long_chapter, 300 * SECOND], [2 * SECOND, 0], [points, []], 600 * SECOND)

    first, short = pieces[:-1], pieces[-1]
    assert len(first) == 6 and (short.chapter, short.start, short.samples) == (1, 0, 300 * SECOND)
    pauses = dict(points)
    for piece, following in itertools.pairwise(first):
        assert piece.start + piece.samples == following.start
        assert pauses[following.start] >= MIN_CUT_PAUSE and piece.trailing_silence == pauses[following.start]
        assert abs(piece.samples - 600 * SECOND) <= 20 * SECOND
    assert first[-1].start + first[-1].samples == long_chapter and first[-1].trailing_silence == 2 * SECOND


def test_a_chapter_without_usable_pauses_stays_one_piece():
    points = [(SECOND * k, FRAME) for k in range(1, 3600)]  # every pause too short to cut in
    assert len(cut_into_pieces([3600 * SECOND], [0], [points], 600 * SECOND)) == 1


def test_frame_formula_and_adts_count_match_ffmpeg(tmp_path):
    for samples in (1, 1024, 1025, 30_000):
        path = tmp_path / f"{samples}.aac"
        subprocess.run(
            [
                ffmpeg_binary(),
                "-nostdin",
                "-v",
                "error",
                "-f",
                "lavfi",
                "-i",
                f"sine=r={SECOND},atrim=end_sample={samples}",
                "-c:a",
                "aac",
                "-aac_coder",
                "fast",
                "-f",
                "adts",
                str(path),
            ],
            check=True,
            timeout=60,
        )
        packets = subprocess.run(
            [
                "ffprobe",
                "-v",
                "error",
                "-count_packets",
                "-show_entries",
                "stream=nb_read_packets",
                "-of",
                "csv=p=0",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        kept = path.with_suffix(".frames")
        assert keep_adts_frames(path, kept) == int(packets) == frames_for(samples)
        assert read_frames(kept).count == int(packets)
    assert probe(path)["streams"][0]["codec_name"] == "aac"

"""Trim leading/trailing silence and stray noise from one sentence's audio.

Upstream ChatTTS deletes every sample with |x| <= 1e-5 anywhere in the waveform, which removes
zero crossings inside words and shortens the speech itself. Here only the *edges* are trimmed, and
the decision is made on the RMS level of short windows, never on single samples:

1. Split the sentence into ``window_ms`` windows and measure each window's RMS level in dBFS.
2. A window is active when it is above ``max(floor_dbfs, loudest window - relative_db)``: the
   absolute floor ignores hiss, the relative part adapts to quiet and loud takes alike.
3. Active windows closer than ``bridge_ms`` are merged into regions (pauses inside speech stay).
4. Regions shorter than ``min_region_ms`` (clicks, a breath blip) at the edges are dropped.
5. Keep a small margin before the first and after the last region so soft onsets and decaying
   tails are not clipped, and fade the cut edges over a few ms so they cannot click.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from pipeline.types import SAMPLE_RATE


@dataclass(frozen=True)
class TrimSettings:
    """How silence is detected at the edges of a sentence."""

    window_ms: int = 10
    floor_dbfs: float = -55.0  # below this nothing counts as speech
    relative_db: float = 40.0  # ...and neither does anything 40 dB under the loudest window
    bridge_ms: int = 250  # active windows closer than this belong to one region
    min_region_ms: int = 60  # shorter isolated edge regions are noise (a click, a blip)
    lead_ms: int = 30  # silence kept before the first region (soft consonant onsets)
    tail_ms: int = 80  # silence kept after the last region (decays, releases)
    fade_ms: int = 4


def speech_bounds(samples: np.ndarray, settings: TrimSettings = TrimSettings()) -> tuple[int, int]:
    """Find the sample range to keep.

    Args:
        samples: int16 (or float) mono samples at SAMPLE_RATE.
        settings: detection thresholds.

    Returns:
        ``(start, end)`` sample indices; ``start == end`` when the audio holds no speech at all.
    """
    window = max(1, SAMPLE_RATE * settings.window_ms // 1000)
    levels = window_levels_dbfs(samples, window)
    if levels.size == 0:
        return 0, 0
    threshold = max(settings.floor_dbfs, float(levels.max()) - settings.relative_db)
    active = np.flatnonzero(levels > threshold)
    if active.size == 0:
        return 0, 0
    regions = _merge_into_regions(active, bridge_windows=max(1, settings.bridge_ms // settings.window_ms))
    regions = _drop_short_edge_regions(
        regions, min_windows=max(1, settings.min_region_ms // settings.window_ms)
    )
    first_window, last_window = regions[0][0], regions[-1][1]
    start = first_window * window - SAMPLE_RATE * settings.lead_ms // 1000
    end = (last_window + 1) * window + SAMPLE_RATE * settings.tail_ms // 1000
    return max(0, start), min(len(samples), end)


def trim_silence(samples: np.ndarray, settings: TrimSettings = TrimSettings()) -> np.ndarray:
    """Return the speech part of ``samples`` with faded edges (int16 in, int16 out).

    Audio that holds no speech at all comes back empty.
    """
    start, end = speech_bounds(samples, settings)
    return cut_speech(samples, start, end, settings)


def cut_speech(samples: np.ndarray, start: int, end: int, settings: TrimSettings = TrimSettings()) -> np.ndarray:
    """``samples[start:end]`` as int16, its edges faded where they were cut (``speech_bounds``'
    range: what :func:`trim_silence` returns, for a caller that found the bounds before)."""
    kept = np.array(samples[start:end], dtype=np.int16, copy=True)
    fade = min(len(kept) // 2, SAMPLE_RATE * settings.fade_ms // 1000)
    if fade > 0:
        ramp = _fade_ramp(fade)
        if start > 0:
            kept[:fade] = np.rint(kept[:fade] * ramp).astype(np.int16)
        if end < len(samples):
            kept[-fade:] = np.rint(kept[-fade:] * ramp[::-1]).astype(np.int16)
    return kept


@functools.lru_cache(maxsize=8)
def _fade_ramp(samples: int) -> np.ndarray:
    """0 → 1 over ``samples`` (float32; made once per length: every sentence of a chapter uses it)."""
    ramp = np.linspace(0.0, 1.0, samples, endpoint=False, dtype=np.float32)
    ramp.flags.writeable = False
    return ramp


def window_levels_dbfs(samples: np.ndarray, window: int) -> np.ndarray:
    """RMS level of each complete-or-partial ``window``-sample block, in dBFS (full scale = 32768)."""
    count = len(samples)
    if count == 0:
        return np.zeros(0, dtype=np.float64)
    padded_len = -(-count // window) * window
    values = np.zeros(padded_len, dtype=np.float64)
    values[:count] = samples
    blocks = values.reshape(-1, window)
    # The last block is zero-padded; divide by the real sample count so its level is not understated.
    counts = np.full(len(blocks), window, dtype=np.float64)
    counts[-1] = count - (len(blocks) - 1) * window
    mean_square = np.einsum("ij,ij->i", blocks, blocks) / counts
    return 10.0 * np.log10(np.maximum(mean_square, 1e-12) / 32768.0**2)


def _merge_into_regions(active: np.ndarray, bridge_windows: int) -> list[tuple[int, int]]:
    breaks = np.flatnonzero(np.diff(active) > bridge_windows)
    starts = np.concatenate(([active[0]], active[breaks + 1]))
    ends = np.concatenate((active[breaks], [active[-1]]))
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def _drop_short_edge_regions(regions: list[tuple[int, int]], min_windows: int) -> list[tuple[int, int]]:
    """Drop too-short regions from both ends, but never all of them (a one-word 'Oh.' survives)."""
    if all(end - start + 1 < min_windows for start, end in regions):
        return regions
    first = 0
    while regions[first][1] - regions[first][0] + 1 < min_windows:
        first += 1
    last = len(regions) - 1
    while regions[last][1] - regions[last][0] + 1 < min_windows:
        last -= 1
    return regions[first : last + 1]

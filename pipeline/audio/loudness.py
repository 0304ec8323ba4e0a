"""EBU R128 / ITU-R BS.1770-4 loudness measurement, streaming, in numpy (and scipy's IIR filter loop).

Why not ffmpeg's ``loudnorm``? It resamples to 192 kHz and needs two passes; on a 10-hour book
that alone would blow the time budget. Instead every sentence is measured once
(:func:`sentence_energies`, by :mod:`pipeline.audio.measure`, mostly while the GPUs still work),
each chapter's 100 ms energies are put together from its sentences' (:func:`place_energies`),
and each chapter's integrated loudness gives its gain to the target (``export.chapter_loudness``):
one pass, chapter by chapter, so a chapter spoken early is levelled and encoded early, and every
file of the book lands on the same loudness. :class:`LoudnessMeter` measures a whole programme as it streams by: the
reference the sentence route is tested against (tests/test_audio_measure.py), itself tested
against ffmpeg's ebur128.

K-weighting is the standard two-biquad filter (coefficients recomputed for 24 kHz as libebur128
and ffmpeg do), run as an IIR by scipy's ``sosfilt`` with its state carried from one ``add`` to
the next. (An FIR of the filter's first 2,048 taps by FFT overlap-save agrees with it to ~2e-6 in
every 100 ms energy, ~1e-5 dB, in float32, but costs ~6x the CPU: 70 % of a chapter's stitch for
noise-like audio, and the chapter stitch is what is left to wait for once the GPUs are done.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np

ABSOLUTE_GATE_LUFS = -70.0
RELATIVE_GATE_LU = -10.0
BLOCK_MS = 400  # gating block
STEP_MS = 100  # 75 % overlap: a block is four consecutive 100 ms steps
_FULL_SCALE = 32768.0
# Added to every sample before the IIR: in digital silence (the pauses) the filter's state would
# decay into subnormal floats, which the CPU computes ~10x slower (72 vs 8 ns a sample, measured).
# 1e-10 of full scale is far below one 16-bit step (3e-5): no energy anyone could measure.
_DENORMAL_GUARD = np.float32(1e-10)


def k_weighting_biquads(sample_rate: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The BS.1770 pre-filter (high shelf) and RLB high-pass as (b, a) pairs for ``sample_rate``."""
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / sample_rate)
    vh = 10.0 ** (gain_db / 20.0)
    vb = vh**0.4996667741545416
    a0 = 1.0 + k / q + k * k
    shelf = (
        np.array([(vh + vb * k / q + k * k) / a0, 2.0 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0]),
        np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0]),
    )
    f0, q = 38.13547087602444, 0.5003270373238773
    k = math.tan(math.pi * f0 / sample_rate)
    a0 = 1.0 + k / q + k * k
    highpass = (
        np.array([1.0, -2.0, 1.0]),
        np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0]),
    )
    return shelf, highpass


def _sosfilt():  # type: ignore[no-untyped-def]
    """scipy's ``sosfilt`` loop, loaded on first use without the ~1.1-s import of scipy.signal
    (``sos_filter.py``). A stitch helper loads it as it starts (``preload``)."""
    from pipeline.audio.sos_filter import sosfilt

    return sosfilt


def preload() -> None:
    """Import what measuring needs now, not with the first samples."""
    _sosfilt()


def k_weighting_sos(sample_rate: int) -> np.ndarray:
    """The K-weighting filter as second-order sections for ``scipy.signal.sosfilt``."""
    return np.array([np.concatenate((b, a)) for b, a in k_weighting_biquads(sample_rate)])


class LoudnessMeter:
    """Streams samples in; yields the K-weighted mean square of every 100 ms step.

    Feed int16 (or float, full scale 32768) mono samples with :meth:`add` in any chunk sizes, call
    :meth:`finish`, then read :attr:`step_energies`. Steps from several meters (one per chapter) can
    be concatenated and passed to :func:`integrated_lufs`.
    """

    def __init__(self, sample_rate: int) -> None:
        self._step = sample_rate * STEP_MS // 1000
        self._sosfilt = _sosfilt()
        self._sections = k_weighting_sos(sample_rate).astype(np.float32)
        self._state = np.zeros((len(self._sections), 2), dtype=np.float32)  # the filter's memory
        self._step_sum = 0.0  # squares of the filtered samples of the step under way...
        self._step_filled = 0  # ...and how many it has
        self._energies: list[np.ndarray] = []
        self.peak = 0  # the largest absolute sample seen
        self.true_peak = 0.0  # estimated largest inter-sample peak, same scale as the samples
        self.finished = False

    def add(self, samples: np.ndarray) -> None:
        """Feed the next samples."""
        if samples.size == 0:
            return
        magnitude = _magnitude(samples)
        sample_peak = magnitude.max()
        self.peak = max(self.peak, int(sample_peak))
        self.true_peak = max(self.true_peak, _true_peak(samples, magnitude, float(sample_peak), self.true_peak / 2))
        # float32: half the memory traffic of float64, and every 100 ms energy within ~2e-6 of it
        scaled = np.asarray(samples, dtype=np.float32) * np.float32(1.0 / _FULL_SCALE)
        scaled += _DENORMAL_GUARD
        filtered, self._state = self._sosfilt(self._sections, scaled, zi=self._state)
        self._add_squares(np.square(filtered, out=filtered))

    def finish(self) -> None:
        """The end of the programme: a trailing partial 100 ms step is dropped, as BS.1770 does."""
        self.finished = True

    @property
    def step_energies(self) -> np.ndarray:
        """K-weighted mean square per complete 100 ms step (available after :meth:`finish`)."""
        return np.concatenate(self._energies) if self._energies else np.zeros(0)

    def _add_squares(self, squares: np.ndarray) -> None:
        """Sum the squares into 100 ms steps; a step may span several calls."""
        first = min(len(squares), self._step - self._step_filled)  # completes the step under way
        self._step_sum += float(squares[:first].sum(dtype=np.float64))
        self._step_filled += first
        if self._step_filled < self._step:
            return
        whole_steps = (len(squares) - first) // self._step
        end = first + whole_steps * self._step
        sums = squares[first:end].reshape(-1, self._step).sum(axis=1, dtype=np.float64)
        self._energies.append(np.concatenate(([self._step_sum], sums)) / self._step)
        self._step_sum = float(squares[end:].sum(dtype=np.float64))
        self._step_filled = len(squares) - end


def _interpolation_filters(taps_per_side: int = 16, oversampling: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Windowed-sinc taps for the fractional positions between samples (BS.1770 Annex 2 idea)."""
    offsets = np.array([p / oversampling for p in range(1, oversampling)])
    positions = np.arange(-taps_per_side + 1, taps_per_side + 1)
    distance = positions[None, :] - offsets[:, None]
    window = np.kaiser(2 * taps_per_side, 8.0)
    return positions, np.sinc(distance) * window[None, :]


_TAP_POSITIONS, _INTERPOLATORS = _interpolation_filters()


def true_peak(samples: np.ndarray, floor: float = 0.0) -> float:
    """Estimate the true (inter-sample) peak of ``samples`` by 4x band-limited interpolation.

    Only the neighbourhoods of local maxima of ``|x|`` above ``max(floor, sample peak / 2)`` are
    interpolated: an inter-sample peak sits next to a sample peak, and one more than 6 dB above its
    neighbours does not occur in real audio. That keeps this cheap enough to run on every sample.

    Returns:
        The estimated true peak, on the scale of ``samples``.
    """
    values = np.asarray(samples)
    if values.size == 0:
        return 0.0
    magnitude = _magnitude(values)
    return _true_peak(values, magnitude, float(magnitude.max()), floor)


def _magnitude(values: np.ndarray) -> np.ndarray:
    # int32: the magnitude of -32768 does not fit in int16
    return np.abs(values.astype(np.int32) if values.dtype.kind in "iu" else values.astype(np.float64))


def _true_peak(values: np.ndarray, magnitude: np.ndarray, sample_peak: float, floor: float) -> float:
    """``true_peak`` given the samples' magnitudes and their maximum (a meter has them already)."""
    threshold = max(floor, sample_peak / 2)
    if sample_peak <= floor:
        return sample_peak
    # Candidates: local maxima of |x| at or above the threshold (first and last sample excluded),
    # found from the few samples above it — one comparison over the chunk, then small arrays.
    loud = np.flatnonzero(magnitude[1:-1] >= threshold) + 1
    level = magnitude[loud]
    candidates = loud[(level >= magnitude[loud - 1]) & (level >= magnitude[loud + 1])]
    if candidates.size == 0:
        return sample_peak
    # Each candidate's 33 neighbours x[i-16..i+16] (zeros beyond the ends), gathered once: the
    # first 32 interpolate between x[i-1] and x[i], the last 32 between x[i] and x[i+1].
    reach = -int(_TAP_POSITIONS[0]) + 1  # 16
    padded = np.zeros(values.size + 2 * reach, dtype=np.float64)
    padded[reach:-reach] = values
    around = np.lib.stride_tricks.sliding_window_view(padded, 2 * reach + 1)[candidates]
    before, after = around[:, :-1] @ _INTERPOLATORS.T, around[:, 1:] @ _INTERPOLATORS.T
    return max(sample_peak, float(np.abs(after).max()), float(np.abs(before).max()))


SPAN_MS = 10  # a sentence's energies are kept per 10 ms: placed on a chapter's 100 ms steps later
RING_OUT_MS = 50  # the K-weighting's ring-out after a sentence: its energy falls below 1e-10 by then


def sentence_energies(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """The K-weighted sum of squares of every 10 ms of ``samples`` (int16 scale), the filter
    starting at rest and ringing out into 50 ms of silence after them (float32, one per span).

    What :class:`LoudnessMeter` would add for these samples inside a chapter where silence comes
    before and after them (the pauses between sentences), before the sums are cut into the
    chapter's 100 ms steps by :func:`place_energies`.
    """
    span = sample_rate * SPAN_MS // 1000
    count = len(samples) + sample_rate * RING_OUT_MS // 1000
    scaled = np.zeros(-(-count // span) * span, dtype=np.float32)
    scaled[: len(samples)] = samples
    scaled *= np.float32(1.0 / _FULL_SCALE)
    scaled += _DENORMAL_GUARD
    filtered = _sosfilt()(_k_weighting_sos_float32(sample_rate), scaled)
    squares = np.square(filtered, out=filtered)
    return squares.reshape(-1, span).sum(axis=1, dtype=np.float64).astype(np.float32)


def place_energies(placed: Iterable[tuple[int, np.ndarray]], total_samples: int, sample_rate: int) -> np.ndarray:
    """A chapter's 100 ms step energies (as :attr:`LoudnessMeter.step_energies`) from its
    sentences' :func:`sentence_energies`, each ``(first sample in the chapter, energies)``.

    A 10 ms span that straddles two steps is shared in proportion to its samples in each; the
    trailing partial step is dropped, as the meter does. Against the meter run over the stitched
    chapter this moves energy by at most a few ms around a sentence's start (silence, mostly):
    the book's loudness agrees to ~0.01 LU (tests/test_audio_measure.py).
    """
    step = sample_rate * STEP_MS // 1000
    span = sample_rate * SPAN_MS // 1000
    steps = total_samples // step
    indices, weights = [], []
    for first, energies in placed:
        starts = first + span * np.arange(len(energies), dtype=np.int64)
        index = starts // step
        in_first = np.minimum(step * (index + 1) - starts, span) / span
        indices += [index, index + 1]
        weights += [energies * in_first, energies * (1.0 - in_first)]
    if not indices:
        return np.zeros(steps)
    index, weight = np.concatenate(indices), np.concatenate(weights)
    inside = index < steps
    return np.bincount(index[inside], weights=weight[inside], minlength=steps)[:steps] / step


@functools.cache
def _k_weighting_sos_float32(sample_rate: int) -> np.ndarray:
    return k_weighting_sos(sample_rate).astype(np.float32)


def block_energies(step_energies: np.ndarray) -> np.ndarray:
    """Mean square of every 400 ms gating block (four consecutive steps, 75 % overlap)."""
    per_block = BLOCK_MS // STEP_MS
    if len(step_energies) < per_block:
        return np.zeros(0)
    window = np.lib.stride_tricks.sliding_window_view(step_energies, per_block)
    return window.mean(axis=1)


def integrated_lufs(step_energies: Iterable[np.ndarray] | np.ndarray) -> float:
    """Gated integrated loudness (BS.1770-4) of the steps given; ``-inf`` for silence.

    Args:
        step_energies: one array of 100 ms step energies, or several (e.g. one per chapter) that are
            treated as one programme. Gating blocks do not straddle the arrays' seams; with 400 ms
            blocks that changes nothing a listener could hear.
    """
    arrays = [step_energies] if isinstance(step_energies, np.ndarray) else list(step_energies)
    blocks = np.concatenate([block_energies(a) for a in arrays] or [np.zeros(0)])
    loud_enough = blocks[_lufs(blocks) > ABSOLUTE_GATE_LUFS]
    if loud_enough.size == 0:
        return float("-inf")
    relative_gate = _lufs(np.array([loud_enough.mean()]))[0] + RELATIVE_GATE_LU
    gated = loud_enough[_lufs(loud_enough) > relative_gate]
    return float(_lufs(np.array([gated.mean()]))[0])


def _lufs(mean_square: np.ndarray) -> np.ndarray:
    return -0.691 + 10.0 * np.log10(np.maximum(mean_square, 1e-20))

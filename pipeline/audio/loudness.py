"""EBU R128 / ITU-R BS.1770-4 loudness measurement, streaming, in numpy.

Why not ffmpeg's ``loudnorm``? It resamples to 192 kHz and needs two passes; on a 10-hour book
that alone would blow the time budget. Instead the stitcher feeds every chapter's samples through
:class:`LoudnessMeter` while writing them (no extra read), and the book's integrated loudness is
computed once from all chapters' 100 ms energies. One gain then brings the whole book to the
target, so chapters keep their natural relative levels and every book lands on the same loudness.

K-weighting is the standard two-biquad filter (coefficients recomputed for 24 kHz as libebur128
and ffmpeg do). It is applied as an FIR (its impulse response, 2048 taps = 85 ms, long past the
point where it has decayed to nothing) by FFT overlap-save, which vectorises where an IIR cannot.
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
_FIR_TAPS = 2048
_FFT_SIZE = 1 << 16
_FULL_SCALE = 32768.0


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


def k_weighting_fir(sample_rate: int, taps: int = _FIR_TAPS) -> np.ndarray:
    """Impulse response of the K-weighting filter, truncated to ``taps`` samples."""
    response = np.zeros(taps)
    response[0] = 1.0
    for b, a in k_weighting_biquads(sample_rate):
        response = _biquad(response, b, a)
    return response


@functools.lru_cache(maxsize=4)
def _fir_spectrum(sample_rate: int) -> np.ndarray:
    """The K-weighting FIR in the frequency domain, computed once per rate (read-only, shared)."""
    spectrum = np.fft.rfft(k_weighting_fir(sample_rate), _FFT_SIZE)
    spectrum.setflags(write=False)
    return spectrum


class LoudnessMeter:
    """Streams samples in; yields the K-weighted mean square of every 100 ms step.

    Feed int16 (or float, full scale 32768) mono samples with :meth:`add` in any chunk sizes, call
    :meth:`finish`, then read :attr:`step_energies`. Steps from several meters (one per chapter) can
    be concatenated and passed to :func:`integrated_lufs`.
    """

    def __init__(self, sample_rate: int) -> None:
        self._step = sample_rate * STEP_MS // 1000
        self._fir_spectrum = _fir_spectrum(sample_rate)
        self._hop = _FFT_SIZE - (_FIR_TAPS - 1)  # new samples per FFT block (overlap-save)
        self._history = np.zeros(_FIR_TAPS - 1)  # filter state: the input tail of the last block
        self._pending: list[np.ndarray] = []  # input not yet filtered
        self._pending_len = 0
        self._partial_step = np.zeros(0)  # filtered samples squared, short of a whole step
        self._energies: list[np.ndarray] = []
        self.peak = 0  # the largest absolute sample seen
        self.true_peak = 0.0  # estimated largest inter-sample peak, same scale as the samples
        self.finished = False

    def add(self, samples: np.ndarray) -> None:
        """Feed the next samples."""
        if samples.size == 0:
            return
        self.peak = max(self.peak, int(np.max(np.abs(samples.astype(np.int32)))))
        self.true_peak = max(self.true_peak, true_peak(samples, floor=self.true_peak / 2))
        self._pending.append(np.asarray(samples, dtype=np.float64) / _FULL_SCALE)
        self._pending_len += samples.size
        if self._pending_len >= self._hop:
            self._filter_pending(final=False)

    def finish(self) -> None:
        """Flush what is buffered; a trailing partial 100 ms step is dropped, as BS.1770 does."""
        self._filter_pending(final=True)
        self.finished = True

    @property
    def step_energies(self) -> np.ndarray:
        """K-weighted mean square per complete 100 ms step (available after :meth:`finish`)."""
        return np.concatenate(self._energies) if self._energies else np.zeros(0)

    def _filter_pending(self, final: bool) -> None:
        data = np.concatenate(self._pending) if self._pending else np.zeros(0)
        usable = len(data) if final else len(data) - len(data) % self._hop
        for start in range(0, usable, self._hop):
            self._consume_filtered(self._filter_block(data[start : min(start + self._hop, usable)]))
        rest = data[usable:]
        self._pending, self._pending_len = ([rest] if rest.size else []), rest.size

    def _filter_block(self, block: np.ndarray) -> np.ndarray:
        extended = np.concatenate((self._history, block))
        filtered = np.fft.irfft(np.fft.rfft(extended, _FFT_SIZE) * self._fir_spectrum, _FFT_SIZE)
        self._history = extended[-(_FIR_TAPS - 1) :]
        return filtered[_FIR_TAPS - 1 : _FIR_TAPS - 1 + block.size]

    def _consume_filtered(self, filtered: np.ndarray) -> None:
        squares = np.concatenate((self._partial_step, filtered * filtered))
        whole = len(squares) - len(squares) % self._step
        if whole:
            self._energies.append(squares[:whole].reshape(-1, self._step).mean(axis=1))
        self._partial_step = squares[whole:]


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
    sample_peak = max(float(values.max()), -float(values.min()))
    threshold = max(floor, sample_peak / 2)
    if sample_peak <= floor:
        return sample_peak
    # Cheap pre-pass: only chunks whose sample peak reaches the threshold are looked at closely.
    chunk = 64
    usable = values.size - values.size % chunk
    chunks = values[:usable].reshape(-1, chunk)
    loud = np.flatnonzero(
        (chunks.max(axis=1) >= threshold) | (-chunks.min(axis=1).astype(np.float64) >= threshold)
    )
    positions = (loud[:, None] * chunk + np.arange(chunk)[None, :]).ravel()
    positions = np.concatenate((positions, np.arange(usable, values.size)))
    positions = positions[(positions > 0) & (positions < values.size - 1)]
    magnitude = np.abs(values[positions].astype(np.float64))
    before = np.abs(values[positions - 1].astype(np.float64))
    after = np.abs(values[positions + 1].astype(np.float64))
    candidates = positions[(magnitude >= threshold) & (magnitude >= before) & (magnitude >= after)]
    if candidates.size == 0:
        return sample_peak
    best = sample_peak
    for side in (0, -1):  # between x[i] and x[i+1], then between x[i-1] and x[i]
        index = (candidates + side)[:, None] + _TAP_POSITIONS[None, :]
        inside = (index >= 0) & (index < values.size)
        neighbourhood = np.where(inside, values[np.clip(index, 0, values.size - 1)], 0).astype(np.float64)
        best = max(best, float(np.abs(neighbourhood @ _INTERPOLATORS.T).max()))
    return best


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


def _biquad(x: np.ndarray, b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Direct-form I biquad in plain Python: only ever run on a short impulse."""
    y = np.zeros_like(x)
    x1 = x2 = y1 = y2 = 0.0
    for i, xi in enumerate(x):
        yi = b[0] * xi + b[1] * x1 + b[2] * x2 - a[1] * y1 - a[2] * y2
        x2, x1, y2, y1 = x1, xi, y1, yi
        y[i] = yi
    return y

"""Loudness: the numpy meter agrees with ffmpeg's EBU R128 scanner; books land on the target."""

from __future__ import annotations

import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.audio import (
    AssemblyOptions,
    ChapterAudio,
    SentenceAudio,
    assemble_audiobook,
    write_sentence_wav,
)
from pipeline.audio.ffmpeg import measure_loudness
from pipeline.audio.loudness import LoudnessMeter, integrated_lufs, true_peak
from pipeline.bench.synthetic_audio import speechlike_sentence, tone_book
from pipeline.types import SAMPLE_RATE, BookMetadata


def to_pcm(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x * 32767), -32768, 32767).astype("<i2")


def write_wav(path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(samples.tobytes())


def meter_lufs(samples: np.ndarray, chunk: int = 10_000) -> float:
    meter = LoudnessMeter(SAMPLE_RATE)
    for start in range(0, len(samples), chunk):
        meter.add(samples[start : start + chunk])
    meter.finish()
    return integrated_lufs(meter.step_energies)


def test_meter_agrees_with_ffmpeg_ebur128(tmp_path):
    rng = np.random.default_rng(7)
    signals = {
        "speechlike": np.concatenate([speechlike_sentence(rng, 3.0) for _ in range(4)]),
        "low tone": 0.2 * np.sin(2 * np.pi * 60 * np.arange(8 * SAMPLE_RATE) / SAMPLE_RATE),
        "bright noise with gaps": np.concatenate(
            [0.05 * rng.standard_normal(SAMPLE_RATE), np.zeros(SAMPLE_RATE)] * 4
        ),
    }
    for name, signal in signals.items():
        samples = to_pcm(signal)
        write_wav(tmp_path / "x.wav", samples)
        assert meter_lufs(samples) == pytest.approx(
            measure_loudness(tmp_path / "x.wav").integrated_lufs, abs=0.15
        ), name


def test_true_peak_sees_peaks_between_samples():
    # A quarter-rate sine sampled at 45 degrees: every sample is at 0.707 of the real peak (-3 dB).
    samples = to_pcm(0.9 * np.sin(2 * np.pi * np.arange(SAMPLE_RATE) / 4 + np.pi / 4))
    ours = 20 * np.log10(true_peak(samples) / 32768)
    sample_peak = 20 * np.log10(np.abs(samples.astype(np.int32)).max() / 32768)
    assert sample_peak == pytest.approx(20 * np.log10(0.9 * 0.7071), abs=0.01)
    assert ours == pytest.approx(20 * np.log10(0.9), abs=0.15)


def test_silence_has_no_loudness():
    assert integrated_lufs(np.zeros(50)) == float("-inf")
    assert meter_lufs(np.zeros(SAMPLE_RATE * 2, dtype=np.int16)) == float("-inf")


@settings(max_examples=25, deadline=None)
@given(chunk=st.integers(1_000, 200_000))
def test_result_does_not_depend_on_how_samples_are_fed(chunk):
    samples = to_pcm(speechlike_sentence(np.random.default_rng(3), 4.0))
    assert meter_lufs(samples, chunk) == pytest.approx(meter_lufs(samples, len(samples)), abs=1e-6)


@pytest.mark.parametrize("amplitude", [0.01, 0.3, 0.95])
def test_quiet_and_loud_books_reach_the_target(tmp_path, amplitude):
    chapters = tone_book(tmp_path / "s", ["One", "Two"], body_sentences=2, amplitude=amplitude)
    report = assemble_audiobook(
        chapters,
        BookMetadata(title="L"),
        tmp_path / "out",
        tmp_path / "work",
        AssemblyOptions(formats=("m4b",), target_lufs=-20.0),
    )
    reading = measure_loudness(report.outputs[0])
    assert reading.integrated_lufs == pytest.approx(-20.0, abs=1.0)
    assert reading.true_peak_dbtp <= -1.5


@pytest.mark.parametrize("burst_of", ["1 kHz", "9 kHz", "white noise"])
def test_peaky_audio_gets_a_limiter_and_respects_the_ceiling(tmp_path, burst_of):
    """Quiet speech with loud bursts: the gain the speech needs would push the bursts past 0 dBFS.
    High and broadband bursts too, whose peaks fall between samples most (the limiter runs at
    twice the speech's rate)."""
    rng = np.random.default_rng(11)
    sentences = []
    for number in range(4):
        waveform = 0.1 * speechlike_sentence(rng, 1.5)
        burst_at = rng.integers(SAMPLE_RATE // 2, SAMPLE_RATE)
        n = np.arange(240)
        shape = {"1 kHz": np.sin(2 * np.pi * 1000 * n / SAMPLE_RATE),
                 "9 kHz": np.sin(2 * np.pi * 9000 * n / SAMPLE_RATE), "white noise": rng.uniform(-1, 1, 240)}
        burst = np.hanning(240) * shape[burst_of]
        waveform[burst_at : burst_at + 240] += 0.9 * burst
        path = tmp_path / f"{number}.wav"
        write_sentence_wav(path, waveform)
        sentences.append(SentenceAudio(path, 0))
    chapters = [ChapterAudio(0, "Bursts", tuple(sentences))]
    report = assemble_audiobook(
        chapters,
        BookMetadata(title="P"),
        tmp_path / "out",
        tmp_path / "work",
        AssemblyOptions(formats=("m4b", "mp3", "ogg")),
    )
    assert report.limiter and report.gain_db > 2  # the gain lifts the bursts past 0 dBFS
    for output in report.outputs:
        assert measure_loudness(output).true_peak_dbtp <= -1.5, output.name


def test_normalisation_can_be_switched_off(tmp_path):
    chapters = tone_book(tmp_path / "s", ["One"], body_sentences=2, amplitude=0.05)
    report = assemble_audiobook(
        chapters,
        BookMetadata(title="N"),
        tmp_path / "out",
        tmp_path / "work",
        AssemblyOptions(formats=("flac",), normalize_loudness=False),
    )
    assert report.gain_db == 0.0
    assert measure_loudness(report.outputs[0]).integrated_lufs == pytest.approx(report.measured_lufs, abs=0.3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_filter_loop_gives_scipy_signals_samples_and_states(dtype):
    """The K-weighting filter runs scipy's compiled loop without importing scipy.signal
    (pipeline/audio/sos_filter.py): fed in chunks with its state carried, as the meter feeds it,
    it gives exactly scipy.signal.sosfilt's samples and states."""
    from scipy.signal import sosfilt as scipy_sosfilt

    from pipeline.audio.loudness import k_weighting_sos
    from pipeline.audio.sos_filter import compiled_kernel, sosfilt

    assert compiled_kernel() is not None  # the direct load works with the locked scipy
    sos = k_weighting_sos(SAMPLE_RATE).astype(dtype)
    samples = np.random.default_rng(0).standard_normal(3 * SAMPLE_RATE).astype(dtype)
    ours, theirs = np.zeros((2, 2), dtype), np.zeros((2, 2), dtype)
    for chunk in np.array_split(samples, [1000, 1001, 40_000]):
        mine, ours = sosfilt(sos, chunk, zi=ours)
        expected, theirs = scipy_sosfilt(sos, chunk, zi=theirs)
        assert mine.dtype == expected.dtype and np.array_equal(mine, expected)
        assert np.array_equal(ours, theirs)
    assert np.array_equal(sosfilt(sos, samples), scipy_sosfilt(sos, samples))


def test_measuring_a_book_never_imports_scipy_signal(tmp_path):
    """scipy.signal costs ~1.1 CPU-s to import, in every process that measures (a run, each
    helper): measuring loudness loads only its filter loop."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from pipeline.audio.loudness import LoudnessMeter, integrated_lufs\n"
            "meter = LoudnessMeter(24000)\n"
            "meter.add((9000 * np.sin(np.arange(48000) / 5.0)).astype(np.int16))\n"
            "meter.finish()\n"
            "print(round(integrated_lufs(meter.step_energies), 1), 'scipy.signal' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    lufs, imported = done.stdout.split()
    assert float(lufs) < 0 and imported == "False"


def test_chapters_measured_at_once_share_one_filter_loop_and_scipy_signal_still_imports():
    """Threads measuring their first chapters at once load the loop once (an extension module
    initialised twice broke scipy.signal's own import in a worker), and scipy.signal imported
    afterwards uses the same loop."""
    import subprocess
    import sys

    code = ("from concurrent.futures import ThreadPoolExecutor\n"
            "import numpy as np\n"
            "from pipeline.audio.loudness import k_weighting_sos\n"
            "from pipeline.audio.sos_filter import compiled_kernel, sosfilt\n"
            "sos, x = k_weighting_sos(24000), np.random.default_rng(2).standard_normal(24000)\n"
            "with ThreadPoolExecutor(8) as pool:\n"
            "    loops = list(pool.map(lambda _: (compiled_kernel(), sosfilt(sos, x))[0], range(8)))\n"
            "import scipy.signal\n"
            "print(len({id(k) for k in loops}), None in loops, np.array_equal(sosfilt(sos, x), scipy.signal.sosfilt(sos, x)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "False", "True"]

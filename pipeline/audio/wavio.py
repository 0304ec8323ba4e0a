"""Sentence WAV files: written atomically by synthesis, read back (validated) by assembly.

Sentence audio is stored as 16-bit PCM mono WAV at :data:`~pipeline.types.SAMPLE_RATE`. Reading is
tolerant of other PCM layouts (pydub converts them) but strict about damage: a missing, truncated or
undecodable file is an :class:`~pipeline.errors.AssemblyError` that names the file and the fix.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import wave
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from pydub import AudioSegment
from pydub.exceptions import CouldntDecodeError

from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

SAMPLE_WIDTH = 2  # bytes: 16-bit PCM
RESYNTHESIZE_FIX = "delete it and run the job again; synthesis redoes sentences whose audio is missing"


def float_to_pcm16(waveform: np.ndarray) -> np.ndarray:
    """Convert float audio in [-1, 1] to int16, clipping overs and silencing NaN/inf.

    Args:
        waveform: any real array; flattened to mono.

    Returns:
        A C-contiguous little-endian int16 array.
    """
    samples = np.nan_to_num(
        np.asarray(waveform, dtype=np.float32).reshape(-1), nan=0.0, posinf=1.0, neginf=-1.0
    )
    # Scale by 32767 (not 32768) so +1.0 maps to the largest positive sample instead of wrapping.
    return np.clip(np.rint(samples * 32767.0), -32768, 32767).astype("<i2")


def write_sentence_wav(path: Path, waveform: np.ndarray, *, durable: bool = True,
                       sync_directory: bool = True) -> float:
    """Write one sentence's audio as a 16-bit PCM mono WAV at 24 kHz, atomically.

    The data goes to a temporary file in the same directory and is renamed over ``path`` only when
    complete, so a crash never leaves a truncated file under the final name.

    Args:
        path: where the WAV goes; its directory is created if needed.
        waveform: float32 mono samples at :data:`SAMPLE_RATE`, nominally in [-1, 1].
        durable: also fsync the file and its directory, so the sentence survives a power cut,
            not just a process crash. Costs ~10 ms per file on a VM disk; a caller writing a whole
            batch may pass False and sync once (``os.sync()``) before acknowledging the batch.
        sync_directory: with ``durable``, fsync the directory after the rename here; False leaves
            that to the caller (:class:`SentenceWavWriter` syncs each folder once per batch).

    Returns:
        The duration written, in seconds.

    Raises:
        AssemblyError: the file cannot be written (disk full, permissions, ...).
    """
    path = Path(path)
    pcm = float_to_pcm16(waveform)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp_name := temporary_sibling(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        raise AssemblyError(f"{path}: cannot create the file: {exc.strerror} ({os_error_fix(exc)})") from exc
    try:
        with os.fdopen(fd, "wb") as raw:
            with wave.open(raw, "wb") as wav:  # closing it completes the header, not the file
                wav.setnchannels(1)
                wav.setsampwidth(SAMPLE_WIDTH)
                wav.setframerate(SAMPLE_RATE)
                wav.writeframes(pcm.tobytes())
            if durable:
                raw.flush()
                os.fsync(raw.fileno())
        os.replace(tmp_name, path)
        if durable and sync_directory:
            _fsync_directory(path.parent)  # makes the rename itself durable
    except OSError as exc:
        remove_quietly(Path(tmp_name))
        raise AssemblyError(
            f"{path}: cannot write the sentence audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    except BaseException:
        remove_quietly(Path(tmp_name))
        raise
    return len(pcm) / SAMPLE_RATE


class SentenceWavWriter:
    """Sentence WAVs written atomically and durably from a few threads, as they are handed in.

    One durable write waits ~10 ms on two fsyncs (VM disk): seconds per batch of hundreds of
    sentences. From ``threads`` threads (the PCM conversion, the writes and the fsyncs release the
    GIL) the waits overlap and the filesystem commits them together. A GPU worker hands each
    sentence in as soon as its waveform reaches the host, while the rest of its batch is still
    being synthesized. (Not one syncfs per batch: that also waits for every other writer on the
    filesystem — the other GPU worker, the assembly — docs/benchmarks.md.)
    Each file is synced as it is written, its folder once per batch when the batch asks for its
    durations. Use as a context manager; leaving it waits for the writes under way. 16 threads: the
    last batch of a run (an end piece of 128 sentences) is written after its last waveform with
    nothing else to overlap, and 8 threads leave 0.16-0.18 s of that wait on the H200 host.
    """

    def __init__(self, threads: int = 16, on_written: Callable[[Path], None] | None = None) -> None:
        """``on_written(path)``: called (from a writer thread) as each file is complete under its name."""
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="wav-writer")
        self._on_written = on_written
        self._writes: dict[object, Future[float]] = {}
        self._folders: dict[object, Path] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> SentenceWavWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def write(self, key: object, path: Path, waveform: np.ndarray) -> None:
        """Write ``waveform`` to ``path`` (once per ``key``: a second hand-in is ignored)."""
        with self._lock:
            if key not in self._writes:
                self._writes[key] = self._pool.submit(write_sentence_wav, path, waveform, sync_directory=False)
                self._folders[key] = path.parent
                if self._on_written is not None:
                    self._writes[key].add_done_callback(lambda done, path=path: self._written(done, path))

    def _written(self, done: Future[float], path: Path) -> None:
        if not done.cancelled() and done.exception() is None:
            self._on_written(path)  # type: ignore[misc]  # registered only when given

    def seconds(self) -> dict[object, float]:
        """Every file's duration by key, once all are written and durable; raises the first
        AssemblyError."""
        with self._lock:
            keys = list(self._writes)
        return self._durable(keys, forget=False)

    def take_seconds(self, keys: Sequence[object]) -> dict[object, float]:
        """The durations of ``keys`` once those are written and durable, forgotten here afterwards
        (a worker's stream of batches records each batch as its files are done); raises the first
        AssemblyError."""
        return self._durable(keys, forget=True)

    def _durable(self, keys: Sequence[object], forget: bool) -> dict[object, float]:
        """Wait for the files of ``keys``, then fsync each of their folders once (the renames made
        durable: one fsync per folder instead of one per file — the last batch of a run waits
        for them with nothing else to overlap)."""
        with self._lock:
            writes = {key: self._writes[key] for key in keys if key in self._writes}
            folders = {self._folders[key] for key in writes}
        try:
            seconds = {key: write.result() for key, write in writes.items()}
            for synced in [self._pool.submit(_sync_folder, folder) for folder in folders]:
                synced.result()
            return seconds
        finally:
            if forget:
                with self._lock:
                    for key in writes:
                        self._writes.pop(key, None)
                        self._folders.pop(key, None)


def _sync_folder(folder: Path) -> None:
    try:
        _fsync_directory(folder)
    except OSError as exc:
        raise AssemblyError(
            f"{folder}: cannot make the sentence audio durable: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_sentence_audio(path: Path) -> AudioSegment:
    """Read a sentence WAV as a pydub segment in the canonical layout (16-bit mono 24 kHz).

    Args:
        path: the sentence WAV.

    Returns:
        The audio, converted by pydub if the file used another rate, width or channel count.

    Raises:
        AssemblyError: the file is missing, truncated or cannot be decoded.
    """
    path = Path(path)
    try:
        segment = _read_pcm_wav(path)
    except FileNotFoundError as exc:
        raise AssemblyError(
            f"{path}: sentence audio is missing (run the job again; synthesis redoes "
            "sentences whose audio is missing)"
        ) from exc
    except (wave.Error, EOFError):
        segment = _read_with_ffmpeg(path)  # e.g. float WAV, which the wave module cannot read
    except OSError as exc:
        raise AssemblyError(
            f"{path}: cannot read the sentence audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    return to_canonical(segment)


def read_sentence_samples(path: Path) -> np.ndarray:
    """A sentence WAV's int16 samples in the canonical layout (as ``read_sentence_audio``).

    A file exactly as :func:`write_sentence_wav` writes it (a 44-byte PCM header for 16-bit mono
    at SAMPLE_RATE, then the samples, nothing after) is read in one go and viewed in place;
    parsing it with the wave module and pydub would cost a third of writing a chapter. Anything else
    goes the general way (converted, or a clear error).

    Raises:
        AssemblyError: the file is missing, truncated or cannot be decoded.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        data = b""  # the general way says what is wrong
    if _is_canonical(data[:_CANONICAL_HEADER.size], len(data)):
        return np.frombuffer(data, dtype="<i2", offset=_CANONICAL_HEADER.size)
    return segment_samples(read_sentence_audio(path))


# "RIFF", size, "WAVE", a 16-byte "fmt " chunk (PCM, mono, rate, byte rate, block align, bits), "data", size
_CANONICAL_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")
_CANONICAL_LAYOUT = (b"WAVE", b"fmt ", 16, 1, 1, SAMPLE_RATE, SAMPLE_RATE * SAMPLE_WIDTH, SAMPLE_WIDTH,
                     8 * SAMPLE_WIDTH, b"data")


def _is_canonical(header: bytes, file_size: int) -> bool:
    """Whether a file of ``file_size`` bytes starting with ``header`` is a canonical WAV: the
    44-byte PCM header for 16-bit mono at SAMPLE_RATE, then the samples, nothing after."""
    if len(header) != _CANONICAL_HEADER.size:
        return False
    riff, riff_size, *layout, data_size = _CANONICAL_HEADER.unpack(header)
    return (riff == b"RIFF" and tuple(layout) == _CANONICAL_LAYOUT and riff_size == file_size - 8
            and data_size == file_size - _CANONICAL_HEADER.size)


def canonical_samples_offset(path: Path) -> int:
    """Where the samples start in a chapter WAV as the wave module writes it (16-bit mono at
    SAMPLE_RATE behind the canonical 44-byte header), for encoders that read a stretch of it raw.

    Raises:
        AssemblyError: the file is missing or laid out otherwise (then a raw read would be noise).
    """
    try:
        with open(path, "rb") as wav:
            header = wav.read(_CANONICAL_HEADER.size)
            size = os.fstat(wav.fileno()).st_size
    except OSError as exc:
        raise AssemblyError(
            f"{path}: cannot read the chapter audio: {exc.strerror} ({os_error_fix(exc)})"
        ) from exc
    if _is_canonical(header, size):
        return _CANONICAL_HEADER.size
    raise AssemblyError(f"{path}: the chapter audio is not a 16-bit mono {SAMPLE_RATE} Hz WAV as stitched "
                        "(it changed after stitching; assemble the book again)")


def to_canonical(segment: AudioSegment) -> AudioSegment:
    """Convert any pydub segment to 16-bit mono at SAMPLE_RATE (a no-op when it already is)."""
    if segment.channels != 1:
        segment = segment.set_channels(1)
    if segment.sample_width != SAMPLE_WIDTH:
        segment = segment.set_sample_width(SAMPLE_WIDTH)
    if segment.frame_rate != SAMPLE_RATE:
        segment = segment.set_frame_rate(SAMPLE_RATE)
    return segment


def segment_samples(segment: AudioSegment) -> np.ndarray:
    """View a canonical segment's PCM as an int16 array (no copy)."""
    return np.frombuffer(segment.raw_data, dtype="<i2")


def _read_pcm_wav(path: Path) -> AudioSegment:
    with wave.open(str(path), "rb") as wav:
        channels, width, rate, frames = (
            wav.getnchannels(),
            wav.getsampwidth(),
            wav.getframerate(),
            wav.getnframes(),
        )
        data = wav.readframes(frames)
    expected = frames * channels * width
    if len(data) != expected:
        held = len(data) // max(1, channels * width)
        raise AssemblyError(
            f"{path}: sentence audio is truncated (its header promises {frames} samples, "
            f"the file holds {held}); {RESYNTHESIZE_FIX}"
        )
    if width not in (1, 2, 3, 4):
        raise AssemblyError(f"{path}: unsupported WAV sample width of {width} bytes; {RESYNTHESIZE_FIX}")
    return AudioSegment(data=data, sample_width=width, frame_rate=rate, channels=channels)


def _read_with_ffmpeg(path: Path) -> AudioSegment:
    try:
        return AudioSegment.from_file(str(path))
    except (CouldntDecodeError, IndexError, OSError) as exc:
        raise AssemblyError(
            f"{path}: sentence audio is corrupt or not a WAV file; {RESYNTHESIZE_FIX}"
        ) from exc

"""Sentence WAV files, written atomically by synthesis (read back by ``wav_reading.py``).

Sentence audio is stored as 16-bit PCM mono WAV at :data:`~pipeline.types.SAMPLE_RATE`, under a
temporary name first (``pipeline/temp_files.py``), fsynced where it must survive a power cut.
"""

from __future__ import annotations

import logging
import os
import threading
import wave
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

SAMPLE_WIDTH = 2  # bytes: 16-bit PCM


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

"""Measure each sentence once — where its speech is, how loud, how peaky — and keep it beside its WAV.

A chapter is its sentences with silence between them, so its loudness and peaks follow from its
sentences': each sentence's speech bounds (the trim), the K-weighted energy of every 10 ms of its
speech, and its sample and true peaks (:class:`SentenceMeasure`). A GPU worker measures the
sentences as it writes them while it speaks the next ones (:class:`MeasureAhead`, in helper
processes) and leaves each measure beside its WAV as ``<name>.wav.measure``; assembly reads those
instead of the audio. After the last batch the only pass over a book's audio is then the one that
writes its chapters: no chapter is read again to meter it or to apply the book's gain.

A measure is trusted only for the very file it was taken from (the WAV's size, modification time
and inode) with the same trimming, and only if its checksum holds; anything else is measured again
(and the file rewritten). Measures are a cache: losing one costs time, never a wrong result, and a
sentence measured here or ahead gives the same numbers (one function, float32 energies either way).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.audio.failures import remove_quietly
from pipeline.audio.loudness import sentence_energies, true_peak
from pipeline.audio.stitch_helpers import call_in_helper, set_helper_niceness
from pipeline.audio.trim import cut_speech, speech_bounds
from pipeline.audio.wav_reading import read_sentence_samples
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

MEASURE_SUFFIX = ".measure"
_MAGIC = b"TTSM"
_VERSION = 1
# magic, version, trimmed, WAV size, mtime_ns, inode, start, end, peak, true peak, spans, crc32
_HEADER = struct.Struct("<4sBBxxqqqqqidII")


@dataclass(frozen=True)
class SentenceMeasure:
    """One sentence's speech and levels, as a chapter uses them."""

    start: int  # the speech within the WAV, in samples (start == end: no speech at all)
    end: int
    peak: int  # the largest absolute int16 sample of the speech (edges faded)
    true_peak: float  # estimated inter-sample peak, int16 scale
    energies: np.ndarray = field(repr=False, compare=False)  # loudness.sentence_energies of the speech

    @property
    def samples(self) -> int:
        return self.end - self.start


def measure_path(wav_path: Path) -> Path:
    """Where the measure of ``wav_path`` is kept."""
    return wav_path.with_name(wav_path.name + MEASURE_SUFFIX)


def measure_sentence(wav_path: Path, trim: bool) -> SentenceMeasure:
    """The sentence's measure: the one kept beside it if it still fits, else taken now and kept.

    Raises:
        AssemblyError: the WAV is missing, truncated or undecodable (named, with the fix).
    """
    wav_path = Path(wav_path)
    try:
        identity: tuple[int, int, int] | None = _identity(wav_path)
    except OSError:
        identity = None  # missing or unreadable: read_sentence_audio below says what to do
    if identity is not None:
        kept = _read_kept(measure_path(wav_path), identity, trim)
        if kept is not None:
            return kept
    samples = read_sentence_samples(wav_path)
    measure = take_measure(samples, trim)
    if identity is not None:
        _keep(measure_path(wav_path), identity, trim, measure)
    return measure


def take_measure(samples: np.ndarray, trim: bool) -> SentenceMeasure:
    """Measure int16 samples: the speech bounds (the whole when ``trim`` is off), then the levels
    of exactly what a chapter will hold (``trim.cut_speech``: edges faded)."""
    start, end = speech_bounds(samples) if trim else (0, len(samples))
    speech = cut_speech(samples, start, end)
    if speech.size == 0:
        return SentenceMeasure(start, start, 0, 0.0, np.zeros(0, dtype=np.float32))
    return SentenceMeasure(
        start=start,
        end=end,
        peak=int(np.abs(speech.astype(np.int32)).max()),  # int32: |-32768| does not fit in int16
        true_peak=true_peak(speech),
        energies=sentence_energies(speech, SAMPLE_RATE),
    )


def measure_ahead(wav_paths: Sequence[Path]) -> int:
    """Measure and keep every sentence not yet measured (trimmed, the default); what a helper runs
    for :class:`MeasureAhead`. A file that cannot be read is left for assembly to report.

    Returns:
        How many were measured.
    """
    measured = 0
    for path in wav_paths:
        try:
            measure_sentence(path, trim=True)
            measured += 1
        except (AssemblyError, OSError) as exc:
            log.debug("%s: not measured ahead: %s", path, exc)
    return measured


class MeasureAhead:
    """Measures written sentences in ``helpers`` helper processes while the caller goes on.

    :meth:`add` takes each sentence as soon as its WAV is written and returns at once; every
    ``GROUP`` of them, one of a few threads hands the group to a helper process
    (:mod:`pipeline.audio.stitch_helpers`), so the measuring holds no lock of the caller's (a GPU
    worker's decode loop) and keeps pace with the writing instead of starting when the batch ends
    (measured a whole batch at a time, 1,024 sentences keep four helpers busy for 0.7 s after the
    batch, and the recording of the last batches waits for them). :meth:`settle` hands over what
    is still gathering for some sentences and returns what to wait for. With ``helpers`` 0 it does
    nothing: assembly measures. Best effort throughout: a failure is logged and left for assembly.
    :meth:`close` waits.
    """

    GROUP = 64  # sentences per request: ~0.2 s of a helper's time
    NICENESS = 10  # as a CPU worker beside GPU workers: the GPU's feeding threads come first

    def __init__(self, helpers: int) -> None:
        if helpers > 0:
            set_helper_niceness(self.NICENESS)
        self._pool = (
            ThreadPoolExecutor(max_workers=helpers, thread_name_prefix="measure-ahead") if helpers > 0 else None
        )
        self.helpers = helpers
        self._lock = threading.RLock()  # a request that is already done calls back at once
        self._gathering: list[Path] = []  # written, not yet handed to a helper
        self._requests: dict[Path, Future[None]] = {}  # handed to a helper, until measured
        self.measured = 0

    def add(self, wav_path: Path) -> None:
        """A sentence whose WAV is written (any thread); measured with the next full group."""
        if self._pool is None:
            return
        with self._lock:
            self._gathering.append(Path(wav_path))
            if len(self._gathering) >= self.GROUP:
                self._hand_over_gathering(self.GROUP)

    def settle(self, wav_paths: Sequence[Path]) -> list[Future[None]]:
        """What measures ``wav_paths`` (added before): the groups already handed over, and those still
        gathering handed over now, shared among the helpers. The futures end (never with an error)
        once each group is measured or given up on."""
        if self._pool is None:
            return []
        wanted = {Path(p) for p in wav_paths}
        with self._lock:
            if any(p in wanted for p in self._gathering):
                self._hand_over_gathering(-(-len(self._gathering) // self.helpers))
            return list({id(f): f for f in (self._requests.get(p) for p in wanted) if f is not None}.values())

    def _hand_over_gathering(self, group: int) -> None:
        """Every sentence gathered so far to the helpers, ``group`` per request (lock held)."""
        assert self._pool is not None
        paths, self._gathering = self._gathering, []
        for first in range(0, len(paths), max(1, group)):
            part = paths[first : first + max(1, group)]
            request = self._pool.submit(self._measure, part)
            for path in part:
                self._requests[path] = request
            request.add_done_callback(lambda _, part=part: self._forget(part))

    def _forget(self, paths: list[Path]) -> None:
        with self._lock:
            for path in paths:
                self._requests.pop(path, None)

    def _measure(self, paths: list[Path]) -> None:
        try:
            count = call_in_helper(f"measuring {len(paths)} sentences ahead", measure_ahead, paths)
        except Exception:  # best effort: assembly measures what is missing
            log.warning("measuring %d sentences ahead failed; assembly will measure them", len(paths),
                        exc_info=True)
            return
        with self._lock:
            self.measured += count

    def close(self) -> None:
        if self._pool is not None:
            with self._lock:
                self._hand_over_gathering(self.GROUP)
            self._pool.shutdown(wait=True)


# ------------------------------------------------------------------------------ the kept file


def _identity(wav_path: Path) -> tuple[int, int, int]:
    info = os.stat(wav_path)
    return info.st_size, info.st_mtime_ns, info.st_ino


def _read_kept(path: Path, identity: tuple[int, int, int], trim: bool) -> SentenceMeasure | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < _HEADER.size:
        return None
    magic, version, trimmed, size, mtime, inode, start, end, peak, true_peak, spans, crc = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if (
        magic != _MAGIC
        or version != _VERSION
        or bool(trimmed) != trim
        or (size, mtime, inode) != identity
        or len(payload) != 4 * spans
        or zlib.crc32(payload) != crc
    ):
        return None
    return SentenceMeasure(start, end, peak, true_peak, np.frombuffer(payload, dtype="<f4").copy())


def _keep(path: Path, identity: tuple[int, int, int], trim: bool, measure: SentenceMeasure) -> None:
    """Write the measure beside the WAV (atomically; not synced: a lost one is measured again)."""
    payload = np.ascontiguousarray(measure.energies, dtype="<f4").tobytes()
    header = _HEADER.pack(_MAGIC, _VERSION, int(trim), *identity, measure.start, measure.end, measure.peak,
                          measure.true_peak, len(measure.energies), zlib.crc32(payload))
    partial = temporary_sibling(path)
    try:
        partial.write_bytes(header + payload)
        os.replace(partial, path)
    except OSError as exc:
        remove_quietly(partial)
        log.debug("%s: measure not kept: %s", path, exc)

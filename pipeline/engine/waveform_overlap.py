"""Decoder + Vocos for sentences as they finish, on a second CUDA stream, while the GPT goes on.

The GPT's decode steps are bound by memory bandwidth and leave compute idle; Decoder + Vocos are
convolutions, bound by compute. Finished sentences are buffered until they fill a decode chunk
(``row_steps_per_chunk``; the first ones go at once), then the whole chunks among them are
launched on a side stream (rows that would leave a chunk part-filled wait for the next ones: a
chunk costs its padded shape however few rows it holds), so their waveforms are made while the
next steps run instead of after the last sentence of the batch.
Smaller launches cost more than they hide: decoding at every harvest (a few rows every 8 steps)
makes the H200 run *slower* (docs/engine.md).

On the GPU the chunk is launched from a thread of its own: queueing its ~1,000 kernels takes the
host 10-20 ms, longer than the decode steps queued ahead of it last (launched from the loop's
own thread, a torch.profiler trace of the H200 shows the steps' stream idle 0.26 s of a 1.3 s
batch, waiting for the host to come back); a chunk whose shape was captured is one replay
(``waveform_graphs.py``). PyTorch releases the GIL inside each op, so the loop keeps the steps'
queue filled meanwhile. Each chunk's audio is copied to pinned host memory on
the side stream as it is made, so the end of a batch waits only for its last chunk. On CPU the
decode simply runs when a chunk is full. Either way the waveforms are exactly
``WaveformDecoder.decode``'s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from pipeline.engine.step_graphs import CAPTURE_LOCK
from pipeline.engine.streams import kept_stream
from pipeline.engine.timing import PhaseClock
from pipeline.engine.waveform import WaveformDecoder, to_numpy

OnWaveform = Callable[[int, np.ndarray], None]
COPY_POLL_SECONDS = 0.002  # how often the first chunk's copy to the host is looked at
PINNED_PIECE = 1 << 23  # floats per pinned host buffer (32 MB): sizes the host allocator keeps
# Finished rows are launched once this many chunks' worth have gathered, by whole chunks (the
# rows of a part-filled one wait for the next launch, once). ``python -m pipeline.bench step-model``,
# padded row-steps against the rows' own, before (all rows at one chunk's worth) -> one -> two: the
# bench 1.34 -> 1.19 -> 1.19x, a pool refilling 1,024 slots 1.28 -> 1.20 -> 1.20x, 512 slots 1.31 ->
# 1.32 -> 1.24x, 256 slots 1.39 -> 1.41 -> 1.39x; but what is left at the end, decoded after the last
# step, 1.15 chunks at one and 2.15 at two in the bench (~16 ms an H100 chunk): one, for 1,024 slots.
FLUSH_CHUNKS = 1


def side_stream(device: torch.device) -> torch.cuda.Stream:
    """The one side stream of ``device``, the same for every batch (``streams.kept_stream``)."""
    return kept_stream("waveform", device)


class WaveformsAlongside:
    """Use as a context manager: leaving it waits for the decodes still running."""

    def __init__(self, decoder: WaveformDecoder, rows: int | None, clock: PhaseClock,
                 in_thread: bool | None = None, on_ready: OnWaveform | None = None) -> None:
        """``in_thread``: launch chunks from a thread of their own (default: on the GPU).
        ``on_ready(row, waveform)`` is called once per row as soon as its waveform is on the host
        (on the GPU while later rows are still generating; from the launcher thread then).
        ``rows`` None: a stream of rows (more join while it runs); each waveform is handed to
        ``on_ready`` as soon as it is made, on CPU too, and not kept."""
        self.decoder = decoder
        self.clock = clock
        self.on_ready = on_ready
        self.rows, self.keep = rows, rows is not None
        self.submitted = 0
        self.handed = 0
        self.on_host: list[tuple[torch.cuda.Event, Sequence[int]]] = []  # copies not yet handed on
        self.waves: dict[int, torch.Tensor | np.ndarray] = {}
        device = decoder.device
        self.side = side_stream(device) if device.type == "cuda" else None
        in_thread = self.side is not None if in_thread is None else in_thread
        self.launcher = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="waveforms")
                         if in_thread else None)
        self.launched: list[Future[None]] = []
        self.buffered: list[tuple[int, torch.Tensor]] = []
        self.held: set[int] = set()  # buffered rows a flush left waiting already

    def __enter__(self) -> WaveformsAlongside:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.launcher is not None:
            self.launcher.shutdown(wait=True)  # no decode outlives its batch (an OOM retry)

    def submit(self, rows: Sequence[int], hiddens: Sequence[torch.Tensor]) -> None:
        """Finished rows (called by the generation loop at each harvest): the first ones decoded
        at once, the rest once a chunk's worth has gathered."""
        self.buffered += zip(rows, hiddens)
        self.submitted += len(rows)
        # the first rows at once, however few: the first sentence is heard (a run's first WAV
        # written) as soon as it is spoken, not once ~50 more have finished to fill a chunk
        if self.submitted == len(rows):
            self._flush()
        elif sum(h.shape[0] for _, h in self.buffered) >= FLUSH_CHUNKS * self.decoder.row_steps_per_chunk:
            self._flush(whole_chunks=True)

    def _flush(self, whole_chunks: bool = False) -> None:
        """Launch the buffered rows; with ``whole_chunks`` those that fill whole chunks and those
        held back once already (a long row must not wait for its like to the batch's end: its
        batch is recorded once its last waveform is written)."""
        if whole_chunks:
            going = set(self.decoder.whole_chunks([h.shape[0] for _, h in self.buffered]))
            going |= {i for i, (row, _) in enumerate(self.buffered) if row in self.held}
            taken = [entry for i, entry in enumerate(self.buffered) if i in going]
            self.buffered = [entry for i, entry in enumerate(self.buffered) if i not in going]
        else:
            taken, self.buffered = self.buffered, []
        self.held = {row for row, _ in self.buffered}
        if not taken:
            return
        rows, hiddens = [r for r, _ in taken], [h for _, h in taken]
        if self.side is not None:
            self.side.wait_stream(torch.cuda.current_stream(self.decoder.device))  # hiddens ready
            for h in hiddens:
                h.record_stream(self.side)  # not reused by the main stream until the side is done
        if self.launcher is None:
            self._decode(rows, hiddens)
        else:
            self.launched.append(self.launcher.submit(self._decode, rows, hiddens))

    def _decode(self, rows: list[int], hiddens: list[torch.Tensor]) -> None:
        # inference mode and the current device and stream belong to the calling thread; no
        # decode step graph may be captured while this thread queues GPU work
        with contextlib.ExitStack() as scope:
            if self.launcher is not None:
                scope.enter_context(CAPTURE_LOCK)
            scope.enter_context(torch.inference_mode())
            if self.side is not None:
                scope.enter_context(torch.cuda.device(self.decoder.device))
                scope.enter_context(torch.cuda.stream(self.side))
            self._hand_on(wait=False)  # the chunks before this one are usually on the host by now
            scope.enter_context(self.clock.phase("waveform"))
            self._store(rows, self.decoder.decode_on_device(hiddens))
        if self.launcher is not None and self.handed == 0:
            self._hand_on_once_copied()  # the first sentence: heard as soon as it is decoded

    def _hand_on_once_copied(self) -> None:
        """The first chunk's rows handed on once their copy is on the host, on the launcher
        thread (polling: no core spun, no lock held), not at the next chunk's launch: that came
        ~50 finished rows later, 0.7 s after the first sentence was decoded on an H200 with 1,024
        rows in the steps, while the person who started the run waited for it."""
        while self.on_host and not self.on_host[0][0].query():
            time.sleep(COPY_POLL_SECONDS)
        self._hand_on(wait=False)

    def collect(self) -> list[np.ndarray]:
        """Every row's waveform on the host (decodes what is left, waits for the side stream)."""
        self._flush()
        for launched in self.launched:
            launched.result()  # a decode's error is raised here
        if self.side is not None:
            self.side.synchronize()
            torch.cuda.current_stream(self.decoder.device).wait_stream(self.side)
        if not self.keep:
            self._hand_on(wait=True)
            if self.handed != self.submitted:
                raise RuntimeError(f"{self.submitted - self.handed} of {self.submitted} rows got no waveform")
            return []
        missing = [i for i in range(self.rows or 0) if i not in self.waves]
        if missing:
            raise RuntimeError(f"no waveform was decoded for rows {missing}")
        if self.side is not None:
            self._hand_on(wait=True)
            return [self.waves[i] for i in range(self.rows or 0)]  # type: ignore[misc]
        waves = to_numpy([self.waves[i] for i in range(self.rows or 0)])  # type: ignore[misc]
        if self.on_ready is not None:
            for row, wave in enumerate(waves):
                self.on_ready(row, wave)
        return waves

    def _hand_on(self, wait: bool) -> None:
        """``on_ready`` for the rows whose copy to the host has finished (all of them: ``wait``)."""
        while self.on_host and (wait or self.on_host[0][0].query()):
            event, rows = self.on_host.pop(0)
            event.synchronize()
            for row in rows:
                wave = self.waves[row] if self.keep else self.waves.pop(row)
                self.handed += 1
                if self.on_ready is not None:
                    self.on_ready(row, wave)  # type: ignore[arg-type]

    def _store(self, rows: Sequence[int], waves: list[torch.Tensor]) -> None:
        if self.side is None and not self.keep:
            for row, wave in zip(rows, to_numpy(waves)):
                self.handed += 1
                if self.on_ready is not None:
                    self.on_ready(row, wave)
            return
        if self.side is None:
            for row, wave in zip(rows, waves):
                self.waves[row] = wave
            return
        # On the side stream: the chunk's audio into pinned memory in pieces of at most
        # PINNED_PIECE floats (a new size costs a cudaHostAlloc, ~13 ms for the last, largest
        # chunk of a batch on the H200, with the GPU idle), read after collect()'s synchronize
        # (the numpy arrays are views of them).
        start = 0
        while start < len(waves):
            end, size = start + 1, waves[start].numel()
            while end < len(waves) and size + waves[end].numel() <= PINNED_PIECE:
                size += waves[end].numel()
                end += 1
            self._store_piece(rows[start:end], waves[start:end])
            start = end

    def _store_piece(self, rows: Sequence[int], waves: list[torch.Tensor]) -> None:
        flat = torch.cat([w.reshape(-1) for w in waves])
        host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        bounds = np.cumsum([w.numel() for w in waves])[:-1]
        for row, wave in zip(rows, np.split(host.numpy(), bounds)):
            self.waves[row] = wave
        copied = torch.cuda.Event()
        copied.record()  # on the side stream, behind the copy
        self.on_host.append((copied, rows))

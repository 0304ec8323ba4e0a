"""Decoder + Vocos chunks replayed from CUDA graphs, one per chunk shape.

A chunk is ~1,000 kernels (20 ConvNeXt blocks, their GEMM and FFT tiles); launched one by one
from Python they take the host 10-20 ms on a fast host and about three times that on a slow one,
and the thread launching them competes for the interpreter with the thread that feeds the decode
steps (on the H200 the chunks of a 25.8-hour book took 28-42 s beside the steps, their kernels a
third of that). Replayed from a graph a chunk is one launch.

A chunk's steps are padded up to one of ``STEP_BUCKETS`` and its rows up to a power of two (at
most the rows the chunk budget allows at those steps), so a few dozen graphs serve every batch.
Padding rows have no frames and the masks keep padding out of every real row: waveforms are
the eager ones. A shape's first chunk runs eagerly (its cuBLAS and cuFFT plans are made then),
and the shape is captured after it on a stream of its own (``graph_recording``: no stall of the
decode steps mid-book).
All graphs share one memory pool, one input and one output buffer: chunks run one at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pipeline.engine.graph_recording import Allowed, GraphSet
from pipeline.engine.streams import forked

# GPT steps a graphed chunk is padded to: fewer than 32 more than its longest row, or a quarter
STEP_BUCKETS = (32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
                1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096)

DecodePadded = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def bucket_steps(steps: int) -> int:
    """The padded step count of a chunk whose longest row has ``steps`` (0 past the buckets)."""
    return next((bucket for bucket in STEP_BUCKETS if bucket >= steps), 0)


class WaveformGraphs(GraphSet):
    """The graphs of one ``WaveformDecoder``: ``decode_padded(x, frames)`` (x [R, S, C] hidden
    states, zero-padded; frames [R] mel frames per row) → waveforms [R, (2S - 1) * hop]."""

    def __init__(self, decode_padded: DecodePadded, row_steps_per_chunk: int, hop: int,
                 allowed: Allowed = lambda device: False) -> None:
        super().__init__("Decoder+Vocos")
        self.decode_padded = decode_padded
        self.allowed = allowed
        self.budget = row_steps_per_chunk
        self.hop = hop
        self._x: torch.Tensor | None = None  # flat input buffer [budget, C]
        self._frames: torch.Tensor | None = None
        self._out: torch.Tensor | None = None

    def wanted(self, device: torch.device) -> bool:
        """Unless a capture failed, or the device ran out of memory (``release(for_good=True)``),
        where ``allowed``: on a GPU with graphs on and no memory cap (loading.py; a cap counts the
        graphs' pool, which eager chunks would have shared with everything else)."""
        return self.enabled and self.allowed(device)

    def padded_steps(self, steps: int) -> int:
        """The steps a chunk whose longest row has ``steps`` is padded to (0: no graph fits)."""
        bucket = bucket_steps(steps)
        return bucket if 0 < bucket <= self.budget else 0

    def fits(self, rows: int, steps: int) -> bool:
        """Whether a chunk of ``rows`` padded to ``steps`` runs as a graph."""
        return steps in STEP_BUCKETS and rows * steps <= self.budget

    def padded_rows(self, rows: int, steps: int) -> int:
        """The rows a chunk of ``rows`` padded to ``steps`` is run at."""
        return min(1 << (rows - 1).bit_length(), self.budget // steps)

    def run(self, x: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """``decode_padded(x, frames)``, replayed where its shape was captured before (a new
        tensor: the next chunk reuses the graph's output buffer)."""
        rows, steps, channels = x.shape
        buffer = self._input(x)  # first: a new input buffer drops the graphs that read the old one
        graph = self.get((rows, steps))
        if graph is None:
            return self._first_of_shape(x, frames)
        buffer.copy_(x)
        self._row_frames(rows, x.device).copy_(frames)
        graph.replay()
        return self._output(rows, steps, x.device).clone()

    def release(self, for_good: bool = False) -> None:
        """Drop every graph, its pool and the buffers; ``for_good`` (before an out-of-memory
        retry): capture none again, chunks run eagerly from then on — a device that ran out of
        memory cannot spare a pool that keeps its memory between chunks."""
        super().release(for_good)
        self._x = self._frames = self._out = None

    def _first_of_shape(self, x: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """The chunk run eagerly, then its shape captured, both on the capture stream: the
        libraries' plans and workspaces for that stream are made outside the capture."""
        stream = self.stream(x.device)
        with self.new_shapes.timed(), forked(stream), torch.cuda.stream(stream):
            audio = self.decode_padded(x, frames)
            self._capture(x)
        # made on the capture stream, read on the caller's
        audio.record_stream(torch.cuda.current_stream(x.device))
        return audio

    def _capture(self, example: torch.Tensor) -> None:
        """Records ``decode_padded`` over the buffers at ``example``'s shape (nothing runs)."""
        rows, steps, _ = example.shape
        x, frames = self._input(example), self._row_frames(rows, example.device)
        out = self._output(rows, steps, example.device)
        self.capture((rows, steps), example.device, lambda: out.copy_(self.decode_padded(x, frames)))

    def _input(self, like: torch.Tensor) -> torch.Tensor:
        rows, steps, channels = like.shape
        if self._x is None or self._x.shape[1] != channels or self._x.dtype != like.dtype:
            # Every graph reads the buffer it was recorded over: replayed after a new one is made
            # (float32 hidden states after fp16 ones, say), it would read freed memory.
            self.release()
            self._x = torch.zeros(self.budget, channels, dtype=like.dtype, device=like.device)
        return self._x[: rows * steps].view(rows, steps, channels)

    def _row_frames(self, rows: int, device: torch.device) -> torch.Tensor:
        if self._frames is None:
            self._frames = torch.zeros(self.budget // STEP_BUCKETS[0], dtype=torch.int64, device=device)
        return self._frames[:rows]

    def _output(self, rows: int, steps: int, device: torch.device) -> torch.Tensor:
        if self._out is None:
            self._out = torch.zeros(2 * self.budget * self.hop, dtype=torch.float32, device=device)
        return self._out[: rows * (2 * steps - 1) * self.hop].view(rows, -1)

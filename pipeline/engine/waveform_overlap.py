"""Decoder + Vocos for sentences as they finish, on a second CUDA stream, while the GPT goes on.

The GPT's decode steps are bound by memory bandwidth and leave compute idle; Decoder + Vocos are
convolutions, bound by compute. Finished sentences are buffered until they fill one decode chunk
(``row_steps_per_chunk``), then launched on a side stream, so their waveforms are made while the
next steps run instead of after the last sentence of the batch. Smaller launches cost more than
they hide: the first version decoded every harvest (a few rows every 8 steps) and made the H200
run *slower* (docs/engine.md). Each chunk's audio is copied to pinned host memory on the same
side stream right away, so that the end of a batch waits only for its last chunk, not for one
copy of the whole batch's audio. On CPU the decode simply runs when a chunk is full. Either way
the waveforms are exactly ``WaveformDecoder.decode``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pipeline.engine.timing import PhaseClock
from pipeline.engine.waveform import WaveformDecoder, to_numpy


class WaveformsAlongside:
    def __init__(self, decoder: WaveformDecoder, rows: int, clock: PhaseClock) -> None:
        self.decoder = decoder
        self.clock = clock
        self.waves: list[torch.Tensor | np.ndarray | None] = [None] * rows
        device = decoder.device
        self.side = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.buffered: list[tuple[int, torch.Tensor]] = []

    def submit(self, rows: Sequence[int], hiddens: Sequence[torch.Tensor]) -> None:
        """Finished rows (called by the generation loop at each harvest): decoded once a chunk's
        worth has gathered."""
        self.buffered += zip(rows, hiddens)
        if sum(h.shape[0] for _, h in self.buffered) >= self.decoder.row_steps_per_chunk:
            self._flush()

    def _flush(self) -> None:
        if not self.buffered:
            return
        rows, hiddens = [r for r, _ in self.buffered], [h for _, h in self.buffered]
        self.buffered = []
        if self.side is None:
            with self.clock.phase("waveform"):
                self._store(rows, self.decoder.decode_on_device(hiddens))
            return
        main = torch.cuda.current_stream(self.decoder.device)
        self.side.wait_stream(main)  # the hidden states are written by the main stream
        for h in hiddens:
            h.record_stream(self.side)  # not reused by the main stream until the side is done
        with torch.cuda.stream(self.side), self.clock.phase("waveform"):
            self._store(rows, self.decoder.decode_on_device(hiddens))

    def collect(self) -> list[np.ndarray]:
        """Every row's waveform on the host (decodes what is left, waits for the side stream)."""
        self._flush()
        if self.side is not None:
            self.side.synchronize()
            torch.cuda.current_stream(self.decoder.device).wait_stream(self.side)
        missing = [i for i, w in enumerate(self.waves) if w is None]
        if missing:
            raise RuntimeError(f"no waveform was decoded for rows {missing}")
        if self.side is not None:
            return [w for w in self.waves if isinstance(w, np.ndarray)]
        return to_numpy([w for w in self.waves if isinstance(w, torch.Tensor)])

    def _store(self, rows: Sequence[int], waves: list[torch.Tensor]) -> None:
        if self.side is None:
            for row, wave in zip(rows, waves):
                self.waves[row] = wave
            return
        # On the side stream: one copy of the chunk into pinned memory, read after collect()'s
        # synchronize (the numpy arrays are views of it).
        flat = torch.cat([w.reshape(-1) for w in waves])
        host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        bounds = np.cumsum([w.numel() for w in waves])[:-1]
        for row, wave in zip(rows, np.split(host.numpy(), bounds)):
            self.waves[row] = wave

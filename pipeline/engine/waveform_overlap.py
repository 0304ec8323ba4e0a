"""Decoder + Vocos for sentences as they finish, on a second CUDA stream, while the GPT goes on.

The GPT's decode steps are bound by memory bandwidth and leave compute idle; Decoder + Vocos are
convolutions, bound by compute. Launched on a side stream at each harvest, a finished group's
waveforms are made while the next steps run, instead of after the last sentence of the batch.
On CPU the decode simply runs at harvest time. Either way the waveforms are exactly
``WaveformDecoder.decode``'s.
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
        self.waves: list[torch.Tensor | None] = [None] * rows
        device = decoder.device
        self.side = torch.cuda.Stream(device) if device.type == "cuda" else None

    def submit(self, rows: Sequence[int], hiddens: Sequence[torch.Tensor]) -> None:
        """Start decoding these finished rows (called by the generation loop at each harvest)."""
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
        """Every row's waveform on the host (waits for the side stream)."""
        if self.side is not None:
            torch.cuda.current_stream(self.decoder.device).wait_stream(self.side)
        missing = [i for i, w in enumerate(self.waves) if w is None]
        if missing:
            raise RuntimeError(f"no waveform was decoded for rows {missing}")
        return to_numpy([w for w in self.waves if w is not None])

    def _store(self, rows: Sequence[int], waves: list[torch.Tensor]) -> None:
        for row, wave in zip(rows, waves):
            self.waves[row] = wave

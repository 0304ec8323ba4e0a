"""A stream's first finished sentence is handed on (its WAV written) as soon as its decoded audio
is on the host, not when the next chunk of finished sentences is launched: on an H200 with 1,024
rows in the decode steps that came 0.7 s later, while the person who started the run waited.
The side stream's copy is CUDA's; here its event is a stand-in that is done on its third look."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

from pipeline.engine.waveform_overlap import WaveformsAlongside


class CopyDoneOnThirdLook:
    def __init__(self) -> None:
        self.looks = 0

    def query(self) -> bool:
        self.looks += 1
        return self.looks >= 3

    def synchronize(self) -> None:
        assert self.looks >= 3, "handed on before the copy was done"


def test_the_first_chunk_is_handed_on_once_its_copy_is_done_without_waiting_for_the_next() -> None:
    heard: list[tuple[int, int]] = []
    alongside: Any = object.__new__(WaveformsAlongside)  # its state as a first chunk leaves it
    copy = CopyDoneOnThirdLook()
    alongside.on_host, alongside.keep, alongside.handed = [(copy, [4, 9])], False, 0
    alongside.waves = {4: np.zeros(240, np.float32), 9: np.ones(480, np.float32)}
    alongside.on_ready = lambda row, wave: heard.append((row, len(wave)))

    alongside._hand_on_once_copied()

    assert heard == [(4, 240), (9, 480)] and copy.looks >= 3
    assert alongside.handed == 2 and alongside.on_host == [] and alongside.waves == {}

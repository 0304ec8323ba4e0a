"""Where synthesis time goes, without slowing it down: GPU time per phase from CUDA events read
once at the end (no sync per phase), wall time from the host clock.

Phases: ``prefill`` (prompts of newcomers), ``gpt_steps`` (decode steps), ``waveform``
(Decoder + Vocos). The rest of the wall time is the CPU: tokenising, scheduling, result handling.
Also counted: decode steps, and the bytes the steps must read (weights once per step, plus the
attended KV cache), for an achieved-bandwidth figure.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from collections.abc import Iterator

import torch

PHASES = ("prefill", "gpt_steps", "waveform")


class PhaseClock:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._host: dict[str, float] = defaultdict(float)
        self.steps = 0
        self.step_bytes = 0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((name, start, end))
        else:
            began = time.perf_counter()
            yield
            self._host[name] += time.perf_counter() - began

    def count_step(self, read_bytes: int) -> None:
        self.steps += 1
        self.step_bytes += read_bytes

    def totals(self) -> dict[str, float]:
        """Seconds per phase (synchronises the device once)."""
        seconds = dict.fromkeys(PHASES, 0.0)
        seconds.update(self._host)
        if self._events:
            torch.cuda.synchronize()
            for name, start, end in self._events:
                seconds[name] = seconds.get(name, 0.0) + start.elapsed_time(end) / 1000.0
            self._events.clear()
            self._host.update(seconds)
        return seconds

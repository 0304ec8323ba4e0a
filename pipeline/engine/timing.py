"""Where synthesis time goes, without slowing it down: GPU time per phase from CUDA events read
once at the end (no sync per phase), wall time from the host clock.

Phases: ``prefill`` (prompts of newcomers), ``gpt_steps`` (decode steps), ``waveform``
(Decoder + Vocos). The rest of the wall time is the CPU: tokenising, scheduling, result handling.
Also counted: decode steps, and the bytes the steps must read (weights once per step, plus the
attended KV cache), for an achieved-bandwidth figure. On the GPU the clock also keeps a timeline
(``edges``): how long the GPU sat idle before the first phase (tokenising, planning, building the
prompts) and between phases, and how long Decoder+Vocos ran on after the last decode step.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PHASES = ("prefill", "gpt_steps", "waveform")
EDGES = ("idle_start", "idle_between", "tail", "busy_end")  # the timeline, see PhaseClock.edges
# How often PyTorch's caching allocators went to the CUDA driver (PhaseClock.driver_calls)
DEVICE_ALLOCATOR_CALLS = ("num_device_alloc", "num_device_free", "num_alloc_retries")
HOST_ALLOCATOR_CALLS = ("num_host_alloc", "num_host_free")


def allocator_calls() -> dict[str, int]:
    """Driver calls of the device and pinned-host caching allocators so far (process totals).

    Each is a stall a stream should not have once it runs: a ``cudaFree`` (and a retry, which
    frees every cached block) waits for the whole GPU, and ``cudaMalloc``/``cudaHostAlloc`` take
    the host away from queueing steps for a while."""
    device = torch.cuda.memory_stats()
    host = torch.cuda.host_memory_stats()
    return ({name: int(device.get(name, 0)) for name in DEVICE_ALLOCATOR_CALLS}
            | {name: int(host.get(name, 0)) for name in HOST_ALLOCATOR_CALLS})


class PhaseClock:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._host: dict[str, float] = defaultdict(float)
        self.steps = 0
        self.step_bytes = 0
        self._origin: torch.cuda.Event | None = None
        self._edges = dict.fromkeys(EDGES, 0.0)
        self._calls_at_reset = allocator_calls() if self.cuda else {}
        if self.cuda:  # the device is idle at a reset: this event marks the caller's "now"
            self._origin = torch.cuda.Event(enable_timing=True)
            self._origin.record()

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
            self._edges = self._timeline()
            self._events.clear()
            self._host.update(seconds)
        return seconds

    def driver_calls(self) -> dict[str, int]:
        """The allocators' driver calls since the reset (``allocator_calls``); empty on CPU."""
        if not self.cuda:
            return {}
        now = allocator_calls()
        return {name: now[name] - self._calls_at_reset.get(name, 0) for name in now}

    def edges(self) -> dict[str, float]:
        """The GPU's timeline as of the last ``totals()``, in seconds from the reset: idle before
        the first phase (``idle_start``), idle between phases (``idle_between``), Decoder+Vocos
        after the last decode step (``tail``) and the end of the last phase (``busy_end``);
        zeros on CPU."""
        return dict(self._edges)

    def _timeline(self) -> dict[str, float]:
        if self._origin is None:
            return dict.fromkeys(EDGES, 0.0)

        def at(event: torch.cuda.Event) -> float:
            return self._origin.elapsed_time(event) / 1000.0

        spans = sorted((at(start), at(end), name) for name, start, end in self._events)
        busy, reach = 0.0, spans[0][0]
        for begin, end, _ in spans:  # the union of the phases (the side stream overlaps)
            busy += max(0.0, end - max(begin, reach))
            reach = max(reach, end)
        last_step = max((end for _, end, name in spans if name == "gpt_steps"), default=reach)
        last_wave = max((end for _, end, name in spans if name == "waveform"), default=last_step)
        return {"idle_start": spans[0][0], "idle_between": reach - spans[0][0] - busy,
                "tail": max(0.0, last_wave - last_step), "busy_end": reach}

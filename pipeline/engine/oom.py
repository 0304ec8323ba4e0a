"""Out of device memory: the one policy, for every road into the engine.

- **Halve.** A batch that runs out of memory is split in two halves, each run the same way.
  Every row's audio depends only on its own request (per-row seed, masked decoding), so the
  halves produce exactly what the whole batch would have.
- **Isolate.** A sentence that runs out of memory even alone gets a ``SentenceTooLargeError`` in
  its place; every other sentence still gets its audio.
- **Learn.** Once a batch that holds no sentence too large alone has run out of memory, the
  largest batch that ran is reported (``MemoryFit.learned_rows``) so that the caller can tell the
  planner, which then plans no larger batches for this device. A batch that ran out of memory
  only because of a sentence too large alone teaches nothing about batch sizes.

The engine raises ``OutOfDeviceMemory`` (after freeing its decode slots) and nothing else for
memory. A batch on its own goes through ``synthesize_fitting``; a worker's stream of batches
through ``stream_fitting``, which on out-of-memory runs whatever the stream had taken and not yet
finished through ``synthesize_fitting``, so both roads halve, isolate and learn alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipeline.errors import OutOfDeviceMemory, SentenceTooLargeError
from pipeline.types import SynthesisRequest, SynthesisResult

if TYPE_CHECKING:  # the engine's modules import torch; this one must not
    from pipeline.engine.streaming import FetchEarly, MoreRequests

log = logging.getLogger(__name__)

Outcome = SynthesisResult | SentenceTooLargeError  # a sentence's audio, or why it has none
OnWaveform = Callable[[int, object], None]  # (index, float32 waveform) as soon as it is made
OnOutcome = Callable[[int, Outcome], None]


class Synthesizer(Protocol):
    def synthesize(self, requests: Sequence[SynthesisRequest],
                   on_waveform: OnWaveform | None = None) -> list[SynthesisResult]: ...


class StreamSynthesizer(Synthesizer, Protocol):
    def synthesize_stream(self, requests: Sequence[SynthesisRequest], more: MoreRequests,
                          on_result: Callable[[int, SynthesisResult], None],
                          fetch_early: FetchEarly | None = None) -> int: ...


@dataclass
class MemoryFit:
    """What running out of memory taught about the device (see the module)."""

    largest_ran: int = 0  # the largest batch that ran
    halved_for_size: bool = False  # a batch ran out of memory that held no sentence too large alone
    isolated: int = 0  # sentences that did not fit even alone

    @property
    def learned_rows(self) -> int | None:
        """The batch size the planner should not exceed on this device (None: nothing learned)."""
        return self.largest_ran if self.halved_for_size and self.largest_ran else None


def synthesize_fitting(engine: Synthesizer, requests: Sequence[SynthesisRequest],
                       on_waveform: OnWaveform | None = None) -> tuple[list[Outcome], MemoryFit]:
    """``engine.synthesize(requests)`` within the device's memory: one outcome per request, in
    order (see the module). ``on_waveform(index, waveform)`` is passed to the engine with each
    index as in ``requests``; a row handed on before an out-of-memory error is handed on again
    by the retry, with the same audio."""
    fit = MemoryFit()
    return _fitting(engine, list(requests), fit, on_waveform), fit


def stream_fitting(engine: StreamSynthesizer, requests: Sequence[SynthesisRequest], more: MoreRequests,
                   on_outcome: OnOutcome, fetch_early: FetchEarly | None = None) -> MemoryFit:
    """``engine.synthesize_stream`` within the device's memory: ``on_outcome(index, outcome)``
    once per request (numbered as the engine numbers them: ``requests``, then each ``more()``
    in turn). On out-of-memory the stream takes nothing more, and the requests it had taken
    without finishing them run through ``synthesize_fitting``."""
    taken = list(requests)
    finished: set[int] = set()

    def more_taken() -> Sequence[SynthesisRequest] | None:
        got = more()
        taken.extend(got or ())
        return got

    def result(index: int, outcome: SynthesisResult) -> None:
        finished.add(index)
        on_outcome(index, outcome)

    try:
        engine.synthesize_stream(requests, more_taken, result, fetch_early=fetch_early)
        return MemoryFit()
    except OutOfDeviceMemory:
        pass  # retried outside the handler: the live traceback's frames would pin the stream's tensors
    left = [i for i in range(len(taken)) if i not in finished]
    log.warning("out of memory in a stream with %d sentences unfinished; speaking them as one batch, "
                "halving as needed", len(left))
    _free_device_memory()
    outcomes, fit = synthesize_fitting(engine, [taken[i] for i in left])
    for index, outcome in zip(left, outcomes):
        on_outcome(index, outcome)
    return fit


def _fitting(engine: Synthesizer, requests: list[SynthesisRequest], fit: MemoryFit,
             on_waveform: OnWaveform | None) -> list[Outcome]:
    if not requests:
        return []
    try:
        results: list[Outcome] = list(engine.synthesize(requests, on_waveform=on_waveform))
        fit.largest_ran = max(fit.largest_ran, len(requests))
        return results
    except OutOfDeviceMemory:
        pass  # retried outside the handler: the live traceback's frames would pin the batch's tensors
    _free_device_memory()
    if len(requests) == 1:
        fit.isolated += 1
        return [_too_large(requests[0])]
    half = (len(requests) + 1) // 2
    log.warning("out of memory on a batch of %d; retrying as %d + %d", len(requests), half,
                len(requests) - half)
    later = None if on_waveform is None else (lambda index, wave: on_waveform(half + index, wave))
    outcomes = _fitting(engine, requests[:half], fit, on_waveform) + _fitting(engine, requests[half:], fit, later)
    if not any(isinstance(o, SentenceTooLargeError) for o in outcomes):
        fit.halved_for_size = True  # its size, not one of its sentences, was too much
    return outcomes


def _too_large(request: SynthesisRequest) -> SentenceTooLargeError:
    return SentenceTooLargeError(
        f"the sentence {request.text[:60]!r} (max_new_tokens={request.max_new_tokens}) does not fit "
        "in device memory even alone: shorten it in the book, or use a device with more memory")


def _free_device_memory() -> None:
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:  # a fake engine in a test, with no torch installed
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

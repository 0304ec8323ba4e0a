"""Out of device memory: the one policy, for every road into the engine.

- **Halve.** A batch that runs out of memory is split in two halves, each run the same way.
  Every row's audio depends only on its own request (per-row seed, masked decoding), so the
  halves produce exactly what the whole batch would have.
- **Isolate.** A sentence that runs out of memory even alone gets a ``SentenceTooLargeError`` in
  its place; every other sentence still gets its audio.
- **Learn.** Once a batch that holds no sentence too large alone has run out of memory, the
  largest batch that ran is reported (``MemoryFit.learned_rows``) so that the caller can tell the
  planner, which then plans no larger batches for this device. A batch that ran out of memory
  only because of a sentence too large alone teaches nothing about batch sizes. What is learned
  applies at once: a later piece as large as a batch that ran out for its size is cut into
  pieces of the largest size that ran, instead of being tried (a failed try costs its time and
  leaves the allocator fragmented). A caller that passes the same ``MemoryFit`` from batch to
  batch carries that lesson on.
- **Release.** Between a failure and its retry the engine gives back everything it holds between
  batches (``release_device_memory``: decode slots, CUDA graphs and their pool, cached blocks,
  library workspaces), so that a halved batch finds the memory a card of that size would have.

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
    """An engine; one that keeps device memory between batches also offers
    ``release_device_memory()``, called before each retry (else the garbage collector and the
    allocator's cache are all that is released)."""

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
    too_many: int | None = None  # the smallest batch that ran out of memory for its size
    failures: int = 0  # out-of-memory errors met (each one a batch run again in pieces)

    @property
    def learned_rows(self) -> int | None:
        """The batch size the planner should not exceed on this device (None: nothing learned)."""
        return self.largest_ran if self.halved_for_size and self.largest_ran else None

    def piece_rows(self, rows: int) -> int | None:
        """The size to cut a batch of ``rows`` into before trying it (None: try it whole)."""
        if self.too_many is None or rows < self.too_many or not self.largest_ran:
            return None
        return min(self.largest_ran, self.too_many - 1)


def synthesize_fitting(engine: Synthesizer, requests: Sequence[SynthesisRequest],
                       on_waveform: OnWaveform | None = None,
                       fit: MemoryFit | None = None) -> tuple[list[Outcome], MemoryFit]:
    """``engine.synthesize(requests)`` within the device's memory: one outcome per request, in
    order (see the module). ``on_waveform(index, waveform)`` is passed to the engine with each
    index as in ``requests``; a row handed on before an out-of-memory error is handed on again
    by the retry, with the same audio. ``fit``: what earlier batches taught (updated in place)."""
    fit = fit if fit is not None else MemoryFit()
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
    _free_device_memory(engine)
    outcomes, fit = synthesize_fitting(engine, [taken[i] for i in left])
    for index, outcome in zip(left, outcomes):
        on_outcome(index, outcome)
    return fit


def _fitting(engine: Synthesizer, requests: list[SynthesisRequest], fit: MemoryFit,
             on_waveform: OnWaveform | None) -> list[Outcome]:
    if not requests:
        return []
    piece = fit.piece_rows(len(requests))
    if piece is not None:
        return _in_pieces(engine, requests, piece, fit, on_waveform)
    try:
        results: list[Outcome] = list(engine.synthesize(requests, on_waveform=on_waveform))
        fit.largest_ran = max(fit.largest_ran, len(requests))
        return results
    except OutOfDeviceMemory:
        pass  # retried outside the handler: the live traceback's frames would pin the batch's tensors
    fit.failures += 1
    _free_device_memory(engine)
    if len(requests) == 1:
        fit.isolated += 1
        return [_too_large(requests[0])]
    half = (len(requests) + 1) // 2
    log.warning("out of memory on a batch of %d; retrying as %d + %d", len(requests), half,
                len(requests) - half)
    # a first half that itself ran out for its size has taught ``too_many`` before the second
    # half runs: that one is then cut at once, not tried
    outcomes = (_fitting(engine, requests[:half], fit, on_waveform)
                + _fitting(engine, requests[half:], fit, _shifted(on_waveform, half)))
    if not any(isinstance(o, SentenceTooLargeError) for o in outcomes):
        fit.halved_for_size = True  # its size, not one of its sentences, was too much
        _learn_too_many(fit, len(requests))
    return outcomes


def _in_pieces(engine: Synthesizer, requests: list[SynthesisRequest], piece: int, fit: MemoryFit,
               on_waveform: OnWaveform | None) -> list[Outcome]:
    """``requests`` in consecutive pieces of at most ``piece`` rows, as even as they come."""
    count = -(-len(requests) // piece)
    size = -(-len(requests) // count)
    log.info("a batch of %d in %d pieces of <= %d rows (what fits on this device)", len(requests),
             count, size)
    outcomes: list[Outcome] = []
    for start in range(0, len(requests), size):
        outcomes += _fitting(engine, requests[start:start + size], fit, _shifted(on_waveform, start))
    return outcomes


def _learn_too_many(fit: MemoryFit, rows: int) -> None:
    fit.too_many = rows if fit.too_many is None else min(fit.too_many, rows)


def _shifted(on_waveform: OnWaveform | None, start: int) -> OnWaveform | None:
    """``on_waveform`` for a piece that starts at row ``start`` of its batch."""
    if on_waveform is None:
        return None
    return lambda index, wave: on_waveform(start + index, wave)


def _too_large(request: SynthesisRequest) -> SentenceTooLargeError:
    return SentenceTooLargeError(
        f"the sentence {request.text[:60]!r} (max_new_tokens={request.max_new_tokens}) does not fit "
        "in device memory even alone: shorten it in the book, or use a device with more memory")


def _free_device_memory(engine: Synthesizer) -> None:
    """What the engine holds between batches given back (see the module); a fake engine in a
    test may offer nothing to release."""
    import gc

    release = getattr(engine, "release_device_memory", None)
    if release is not None:
        release()
        return
    gc.collect()
    try:
        import torch
    except ImportError:  # a fake engine in a test, with no torch installed
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

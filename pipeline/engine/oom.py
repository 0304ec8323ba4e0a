"""Out-of-memory handling at the engine boundary: halve the batch and retry.

Every row's audio depends only on its own request (per-row seed, masked decoding), so the halves
produce exactly what the whole batch would have.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pipeline.errors import SentenceTooLargeError
from pipeline.types import SynthesisRequest, SynthesisResult

log = logging.getLogger(__name__)


if TYPE_CHECKING:  # the engine's modules import torch; this one must not
    from pipeline.engine.waveform_overlap import OnWaveform


class Synthesizer(Protocol):
    def synthesize(self, requests: Sequence[SynthesisRequest]) -> list[SynthesisResult]: ...


def synthesize_with_oom_halving(
    engine: Synthesizer,
    requests: Sequence[SynthesisRequest],
    on_split: Callable[[int], None] | None = None,
    on_waveform: OnWaveform | None = None,
) -> list[SynthesisResult]:
    """``engine.synthesize(requests)``, splitting the batch in halves on CUDA out-of-memory.

    Args:
        engine: anything with ``synthesize``.
        requests: the batch.
        on_split: called with the new (smaller) batch size each time a batch is split, so the
            caller can learn the device's real limit and plan smaller batches.
        on_waveform: passed to ``engine.synthesize`` (``Engine.synthesize`` says when it is
            called), with each index as in ``requests``. A row handed on before an
            out-of-memory error is handed on again by the retry, with the same audio.

    Raises:
        SentenceTooLargeError: a single request runs out of memory even alone.
    """
    import torch

    try:
        if on_waveform is None:
            return engine.synthesize(requests)
        return engine.synthesize(requests, on_waveform=on_waveform)  # type: ignore[call-arg]
    except torch.OutOfMemoryError:
        pass  # retry outside the handler: the live traceback's frames would pin the batch's tensors
    _free_device_memory()
    if len(requests) <= 1:
        text = requests[0].text[:40] if requests else ""
        raise SentenceTooLargeError(
            f"sentence {text!r} (max_new_tokens={requests[0].max_new_tokens if requests else 0})"
            " does not fit in device memory even alone; lower its max_new_tokens or use a "
            "device with more memory")
    half = (len(requests) + 1) // 2
    log.warning("out of memory on a batch of %d; retrying as %d + %d", len(requests), half,
                len(requests) - half)
    if on_split is not None:
        on_split(half)
    later = None if on_waveform is None else (lambda index, wave: on_waveform(half + index, wave))
    first = synthesize_with_oom_halving(engine, requests[:half], on_split, on_waveform)
    return first + synthesize_with_oom_halving(engine, requests[half:], on_split, later)


def _free_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

"""Fidelity of a reduced precision against fp32 on the same weights and inputs.

- GPT: teacher-forced logits on the reference's own tokens, through the decode path (slots and
  their KV cache, int8 where generation keeps it so): top-1 agreement (share of
  (step, codebook) positions whose arg-max matches) and relative error ||cand - ref|| / ||ref||.
- Decoder + Vocos: waveforms from identical (reference) hidden states: SNR in dB.

The reference data can be computed once and kept (``reference_data``), so a benchmark can measure
each precision with only one engine in memory at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from pipeline.types import SynthesisRequest

if TYPE_CHECKING:
    from pipeline.engine.engine import Engine


@dataclass(frozen=True)
class ReferenceData:
    """What fp32 produced for a set of requests (all on the CPU)."""

    requests: tuple[SynthesisRequest, ...]
    codes: tuple[torch.Tensor, ...]  # [T, Q] per request
    logits: tuple[torch.Tensor, ...]  # float32 [T, Q, V], teacher-forced on ``codes``
    hiddens: tuple[torch.Tensor, ...]  # float32 [T, C]
    waves: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Fidelity:
    top1_agreement: float  # 1.0 = every arg-max agrees
    relative_logit_error: float
    snr_db: float  # waveform SNR; inf when identical


def reference_data(reference: Engine, requests: Sequence[SynthesisRequest]) -> ReferenceData:
    """Run the (fp32) reference once: its tokens, teacher-forced logits, hiddens and waveforms."""
    generated = reference.generate_hiddens(requests)
    hiddens = [h.float().cpu() for h in generated.hiddens or []]
    logits = reference.score_codes(requests, generated.tokens)
    waves = reference.decode_hiddens(hiddens)
    return ReferenceData(requests=tuple(requests), codes=tuple(generated.tokens),
                         logits=tuple(logits), hiddens=tuple(hiddens), waves=tuple(waves))


def measure(candidate: Engine, ref: ReferenceData) -> Fidelity:
    """Compare ``candidate`` with the stored reference on the same inputs."""
    logits = candidate.score_codes(ref.requests, ref.codes)
    top1, rel = logit_agreement(ref.logits, logits)
    waves = candidate.decode_hiddens(ref.hiddens)
    return Fidelity(top1_agreement=top1, relative_logit_error=rel,
                    snr_db=snr_db(ref.waves, waves))


def compare(reference: Engine, candidate: Engine,
            requests: Sequence[SynthesisRequest]) -> Fidelity:
    """``measure(candidate, reference_data(reference, requests))``."""
    return measure(candidate, reference_data(reference, requests))


def logit_agreement(reference: Sequence[torch.Tensor],
                    candidate: Sequence[torch.Tensor]) -> tuple[float, float]:
    """(top-1 agreement, relative L2 error) over all rows, steps and codebooks."""
    agree = total = 0
    err = norm = 0.0
    for ref, cand in zip(reference, candidate):
        ref, cand = ref.double(), cand.double()
        agree += int((ref.argmax(-1) == cand.argmax(-1)).sum())
        total += ref.shape[0] * ref.shape[1]
        err += float(((cand - ref) ** 2).sum())
        norm += float((ref ** 2).sum())
    return agree / max(total, 1), math.sqrt(err / norm) if norm else 0.0


def snr_db(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray]) -> float:
    """10 log10(signal energy / error energy) over all waveforms together."""
    signal = sum(float(np.sum(r.astype(np.float64) ** 2)) for r in reference)
    noise = sum(float(np.sum((c.astype(np.float64) - r) ** 2)) for r, c in zip(reference, candidate))
    if noise == 0:
        return math.inf
    return 10.0 * math.log10(signal / noise)

"""What crosses into and out of the generation loop (``generation.py``): the rows of a batch,
their limits, a source of more rows for a running loop, and what the loop returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from pipeline.engine.prompts import PromptBatch
from pipeline.engine.sampling import RowSampling

OnFinished = Callable[[list[int], list[torch.Tensor]], None]

@dataclass(frozen=True)
class RowLimits:
    min_new: list[int]  # EOS is masked before this many tokens
    max_new: list[int]  # forced stop after this many tokens


@dataclass(frozen=True)
class RowGroup:
    """Rows that join a running loop (the next batch of a stream): prompts, limits, sampling."""

    prompts: PromptBatch
    limits: RowLimits
    sampling: RowSampling
    lengths: list[int]  # prompts.lengths on the host (reading the device copy would wait for the GPU)


Fits = Callable[[RowGroup], bool]


class RowSource(Protocol):
    """Where a running loop gets more rows once its own are all in slots (a worker's next batch).

    ``fits(group)`` says whether the loop's slots and step graphs can run ``group``; a source
    keeps a group that does not fit for a loop of its own and gives no more to this one."""

    def poll(self, free_slots: int, fits: Fits) -> RowGroup | None:
        """A group ready now, or None (never blocks; may start fetching the next one)."""

    def wait(self, fits: Fits) -> RowGroup | None:
        """The next group, blocking until it is ready; None when no more will come."""

    def exhausted(self) -> bool:
        """Whether no group will come any more (the loop may then pack its last rows)."""


@dataclass(frozen=True)
class Generated:
    """Per row: tokens [T, Q] (EOS excluded, on the CPU), the hidden state that produced each token
    [T, C] (on the device; None when not kept), and whether it stopped at ``max_new``."""

    tokens: list[torch.Tensor]
    hiddens: list[torch.Tensor] | None
    hit_limit: list[bool]

"""The GPT's key/value caches: ``KVCache`` for a prefill (all rows at once, [B, H, S, D] per layer)
and ``SlotCache`` for the decode slots (each slot its own length; int8 with an fp16 scale per
vector where ``EngineConfig.kv_cache`` asks for it, `kv_int8.py`; on the GPU filled and read by
the Triton kernels of `decode_attention.py`).

Shapes: B rows, N slots, S or P cache positions, H heads, D head width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import pipeline.engine.decode_attention as decode_attention
import pipeline.engine.kv_int8 as kv_int8

KV = tuple[torch.Tensor, torch.Tensor]  # keys, values
FULL_LEVELS = (kv_int8.LEVELS, kv_int8.LEVELS)  # the int8 cache's keys and values, as production keeps them


@dataclass
class KVCache:
    """Per-layer key and value tensors [B, H, S, D] of a prefill; ``length`` positions are filled."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    length: int = 0

    @staticmethod
    def allocate(layers: int, rows: int, heads: int, positions: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device) -> KVCache:
        shape = (rows, heads, positions, head_dim)
        return KVCache(keys=[torch.empty(shape, dtype=dtype, device=device) for _ in range(layers)],
                       values=[torch.empty(shape, dtype=dtype, device=device) for _ in range(layers)])

    @property
    def rows(self) -> int:
        return self.keys[0].shape[0]


@dataclass
class SlotCache:
    """Per-layer keys and values of the decode slots, [N, H, P, D]: slot-major, so that the first
    B slots are one contiguous block, and position-major within a head, so that a slot's head
    reads one contiguous run. int8 with fp16 scales [N, H, P] per vector when quantized
    (``kv_int8.py``); ``dtype`` is what reads of it give back. ``levels``: the keys' and values'
    largest code, 127 but where ``python -m pipeline.bench formats`` measures what a narrower
    cache would cost in fidelity (the PyTorch path; the GPU kernels write 127 only)."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    key_scales: list[torch.Tensor] = field(default_factory=list)
    value_scales: list[torch.Tensor] = field(default_factory=list)
    dtype: torch.dtype | None = None
    levels: tuple[float, float] = FULL_LEVELS

    @property
    def positions(self) -> int:
        return self.keys[0].shape[2]

    @property
    def quantized(self) -> bool:
        return bool(self.key_scales)

    def tensors(self) -> list[torch.Tensor]:
        return [*self.keys, *self.values, *self.key_scales, *self.value_scales]

    def admit(self, layer: int, slots: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              lengths: torch.Tensor) -> None:
        """A prefill's keys and values [n, H, w, D] into ``slots``, each prompt moved from the
        right end (left padding) to positions [0, lengths[i])."""
        if keys.is_cuda and decode_attention.available() and self.levels == FULL_LEVELS:
            for cache, scales, new in ((self.keys, self.key_scales, keys),
                                       (self.values, self.value_scales, values)):
                decode_attention.admit_prefill(new, cache[layer],
                                               scales[layer] if self.quantized else None,
                                               slots, lengths)
            return
        start = _unpadding_index(keys.shape, lengths)
        self.put(layer, slots, keys.gather(2, start), values.gather(2, start))

    def put(self, layer: int, slots: torch.Tensor, keys: torch.Tensor,
            values: torch.Tensor) -> None:
        """Keys and values [n, H, w, D] into positions [0, w) of ``slots``."""
        width = keys.shape[2]
        for cache, scales, new, levels in ((self.keys, self.key_scales, keys, self.levels[0]),
                                           (self.values, self.value_scales, values, self.levels[1])):
            if self.quantized:
                new, scale = kv_int8.quantize(new, levels)
                scales[layer][slots, :, :width] = scale.to(scales[layer].dtype)
            cache[layer][slots, :, :width] = new.to(cache[layer].dtype)

    def scatter(self, layer: int, write_at: torch.Tensor, keys: torch.Tensor,
                values: torch.Tensor) -> None:
        """One new position per slot (the first B = len(write_at)): keys/values [B, H, 1, D]."""
        rows, heads, _, dim = keys.shape
        at = write_at.view(rows, 1, 1)
        for cache, scales, new, levels in ((self.keys, self.key_scales, keys, self.levels[0]),
                                           (self.values, self.value_scales, values, self.levels[1])):
            if self.quantized:
                new, scale = kv_int8.quantize(new, levels)
                scales[layer][:rows].scatter_(2, at.expand(rows, heads, 1), scale.to(scales[layer].dtype))
            cache[layer][:rows].scatter_(2, at.unsqueeze(-1).expand(rows, heads, 1, dim), new)

    def read(self, layer: int, rows: int, attend: int) -> KV:
        """The first ``rows`` slots' keys and values at positions [0, attend), [B, H, attend, D]
        in the model's dtype (a view, or a dequantized copy)."""
        keys = self.keys[layer][:rows, :, :attend]
        values = self.values[layer][:rows, :, :attend]
        if not self.quantized:
            return keys, values
        return (kv_int8.dequantize(keys, self.key_scales[layer][:rows, :, :attend], self.dtype),
                kv_int8.dequantize(values, self.value_scales[layer][:rows, :, :attend],
                                   self.dtype))


def _unpadding_index(shape: torch.Size, lengths: torch.Tensor) -> torch.Tensor:
    """Gather index [n, H, width, D] that shifts each left-padded row's real positions to 0."""
    rows, heads, width, dim = shape
    positions = torch.arange(width, device=lengths.device).view(1, -1)
    source = (positions + (width - lengths).view(-1, 1)).clamp(max=width - 1)
    return source.view(rows, 1, width, 1).expand(rows, heads, width, dim)

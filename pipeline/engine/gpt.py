"""The ChatTTS GPT (an HF ``LlamaModel``) re-run as a lean decoder with a static KV cache.

Upstream calls the HF model every step with a ``DynamicCache`` that grows by concatenation, builds
masks and position ids on the host, and syncs on every step. Here the same weights run through a
minimal Llama block: fused QKV and gate/up projections, one RoPE table looked up per step, a KV
cache allocated once per batch and written in place, and rows that finish removed from the cache
(``KVCache.keep_rows``) so they stop costing anything.

Shapes: B rows, S cache positions, H heads, D head width, C = H * D hidden width.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

log = logging.getLogger(__name__)

# Not cuDNN attention: on Hopper it is chosen for fp16/bf16 and builds a new execution plan for
# every new KV length, i.e. on every decode step (20+ s per first pass on the H200, docs/engine.md).
_ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


_KV = tuple[torch.Tensor, torch.Tensor]
# store(layer index, new keys, new values) -> the keys and values to attend to
_Store = Callable[[int, torch.Tensor, torch.Tensor], _KV]


class FusedLlamaLayer(nn.Module):
    """One Llama decoder layer with its projections fused: qkv (C -> 3C), gate_up (C -> 2I)."""

    def __init__(self, hf_layer: nn.Module, eps: float) -> None:
        super().__init__()
        attn, mlp = hf_layer.self_attn, hf_layer.mlp
        self.qkv = _fused_linear(attn.q_proj, attn.k_proj, attn.v_proj)
        self.o = _copy_linear(attn.o_proj)
        self.gate_up = _fused_linear(mlp.gate_proj, mlp.up_proj)
        self.down = _copy_linear(mlp.down_proj)
        self.ln_attn = nn.Parameter(hf_layer.input_layernorm.weight.detach().clone())
        self.ln_mlp = nn.Parameter(hf_layer.post_attention_layernorm.weight.detach().clone())
        self.eps = eps


def _copy_linear(layer: nn.Linear) -> nn.Linear:
    out = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None,
                    device=layer.weight.device, dtype=layer.weight.dtype)
    out.weight.data.copy_(layer.weight.detach())
    if layer.bias is not None:
        out.bias.data.copy_(layer.bias.detach())
    return out


def _fused_linear(*layers: nn.Linear) -> nn.Linear:
    """One Linear whose output is the concatenation of ``layers``' outputs (one GEMM, not three)."""
    first = layers[0]
    out_features = sum(layer.out_features for layer in layers)
    has_bias = first.bias is not None
    out = nn.Linear(first.in_features, out_features, bias=has_bias,
                    device=first.weight.device, dtype=first.weight.dtype)
    out.weight.data.copy_(torch.cat([layer.weight.detach() for layer in layers], 0))
    if has_bias:
        out.bias.data.copy_(torch.cat([layer.bias.detach() for layer in layers], 0))
    return out


@dataclass
class KVCache:
    """Per-layer key and value tensors [B, H, S, D], written in place; ``length`` positions are filled.

    Compaction (``keep_rows``) moves the surviving rows to the front of each tensor, one layer at a
    time, so the extra memory it needs is one layer's surviving rows, not a second cache.
    """

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

    def keep_rows(self, index: torch.Tensor) -> None:
        """Keep only the rows in ``index`` (ascending), in that order."""
        n = int(index.numel())
        for tensors in (self.keys, self.values):
            for i, t in enumerate(tensors):
                t[:n] = t.index_select(0, index)
                tensors[i] = t[:n]


class FusedLlama(nn.Module):
    """Upstream's LlamaModel weights behind a decoder loop that suits batched generation."""

    def __init__(self, hf_model: nn.Module) -> None:
        super().__init__()
        config = hf_model.config
        self.hidden = int(config.hidden_size)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(getattr(config, "num_key_value_heads", None) or self.heads)
        if self.kv_heads != self.heads:
            raise ValueError("ChatTTS's GPT uses full multi-head attention; grouped KV is not supported")
        self.head_dim = self.hidden // self.heads
        eps = float(config.rms_norm_eps)
        self.layers = nn.ModuleList(FusedLlamaLayer(layer, eps) for layer in hf_model.layers)
        self.norm = nn.Parameter(hf_model.norm.weight.detach().clone())
        self.eps = eps
        cos, sin = _rope_tables(hf_model, int(config.max_position_embeddings))
        self.register_buffer("rope_cos", cos, persistent=False)  # [max_positions, D], fp32
        self.register_buffer("rope_sin", sin, persistent=False)

    @property
    def dtype(self) -> torch.dtype:
        return self.norm.dtype

    def new_cache(self, rows: int, positions: int) -> KVCache:
        return KVCache.allocate(len(self.layers), rows, self.heads, positions, self.head_dim,
                                self.dtype, self.norm.device)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin for integer ``positions`` [B, L], shaped [B, 1, L, D] in the compute dtype."""
        cos = self.rope_cos[positions].unsqueeze(1).to(self.dtype)
        sin = self.rope_sin[positions].unsqueeze(1).to(self.dtype)
        return cos, sin

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                attn_mask: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run ``x`` [B, L, C] at cache positions [cache.length, cache.length + L) (prefill).

        ``attn_mask`` is additive, [B, 1, L, cache.length + L]. Returns the final-norm hidden
        states [B, L, C] and advances ``cache.length`` by L.
        """
        start, end = cache.length, cache.length + x.shape[1]

        def store(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
            cache.keys[index][:, :, start:end] = keys
            cache.values[index][:, :, start:end] = values
            return cache.keys[index][:, :, :end], cache.values[index][:, :, :end]

        hidden = self._layers(x, rope, attn_mask, store)
        cache.length = end
        return hidden

    def forward_slots(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                      attn_mask: torch.Tensor, cache: KVCache, write_at: torch.Tensor,
                      attend: int) -> torch.Tensor:
        """One decode position for each of the first B slots of ``cache`` (B = len(write_at)).

        Each slot writes its new key/value at its own cache index ``write_at`` [B] and attends
        to cache positions [0, attend) under ``attn_mask`` [B, 1, 1, attend]. Every shape depends
        only on (B, attend), and nothing reads back to the host, so a CUDA graph can hold it.
        """
        rows = write_at.shape[0]
        at = write_at.view(rows, 1, 1, 1).expand(rows, self.heads, 1, self.head_dim)

        def store(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
            slot_keys, slot_values = cache.keys[index][:rows], cache.values[index][:rows]
            slot_keys.scatter_(2, at, keys)
            slot_values.scatter_(2, at, values)
            return slot_keys[:, :, :attend], slot_values[:, :, :attend]

        return self._layers(x, rope, attn_mask, store)

    def _layers(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                attn_mask: torch.Tensor, store: _Store) -> torch.Tensor:
        with sdpa_kernel(_ATTENTION_BACKENDS):
            for i, layer in enumerate(self.layers):
                x = x + self._attention(layer, x, rope, attn_mask, store, i)
                h = F.rms_norm(x, (self.hidden,), layer.ln_mlp, layer.eps)
                gate, up = layer.gate_up(h).chunk(2, dim=-1)
                x = x + layer.down(F.silu(gate) * up)
        return F.rms_norm(x, (self.hidden,), self.norm, self.eps)

    def _attention(self, layer: FusedLlamaLayer, x: torch.Tensor,
                   rope: tuple[torch.Tensor, torch.Tensor], attn_mask: torch.Tensor,
                   store: _Store, index: int) -> torch.Tensor:
        rows, steps, _ = x.shape
        h = F.rms_norm(x, (self.hidden,), layer.ln_attn, layer.eps)
        qkv = layer.qkv(h).view(rows, steps, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        qk = _apply_rope(qkv[:2], *rope)  # [2, B, H, L, D]
        keys, values = store(index, qk[1], qkv[2])
        out = F.scaled_dot_product_attention(qk[0], keys, values, attn_mask=attn_mask)
        return layer.o(out.transpose(1, 2).reshape(rows, steps, self.hidden))


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _rope_tables(hf_model: nn.Module, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's own rotary embedding evaluated once for every position, so scaling variants carry over."""
    device = hf_model.norm.weight.device
    ids = torch.arange(positions, device=device).unsqueeze(0)
    probe = torch.zeros(1, 1, dtype=torch.float32, device=device)
    cos, sin = hf_model.rotary_emb(probe, ids)
    return cos[0].float(), sin[0].float()


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where attention is allowed, -inf elsewhere (no host-to-device copy: graph-safe)."""
    zeros = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return zeros.masked_fill_(~allowed, float("-inf"))

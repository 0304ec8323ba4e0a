"""The ChatTTS GPT (an HF ``LlamaModel``) re-run as a lean decoder with a static KV cache.

Upstream calls the HF model every step with a ``DynamicCache`` that grows by concatenation, builds
masks and position ids on the host, and syncs on every step. Here the same weights run through a
minimal Llama block: fused QKV and gate/up projections, one RoPE table looked up per step, and
two cache layouts: ``KVCache`` for a prefill (all rows at once), ``SlotCache`` for the decode
slots (each slot its own length; on the GPU read by the Triton kernels of `decode_attention.py`).

Shapes: B rows, S cache positions, H heads, D head width, C = H * D hidden width.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from pipeline.engine import decode_attention

log = logging.getLogger(__name__)

# Not cuDNN attention: on Hopper it is chosen for fp16/bf16 and builds a new execution plan for
# every new KV length, i.e. on every decode step (20+ s per first pass on the H200, docs/engine.md).
_ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# Decode-step attention on CUDA in half precision: "triton" (decode_attention.py, the default) or
# "sdpa" (masked SDPA, also the CPU and fp32 path). Set by TTS_JOBS_DECODE_ATTENTION; docs/engine.md
# has what each measured (FlashAttention's variable-length kernel was tried too: no faster).
DECODE_ATTENTION = os.environ.get("TTS_JOBS_DECODE_ATTENTION", "triton")


_KV = tuple[torch.Tensor, torch.Tensor]
# store(layer index, new keys, new values) -> the keys and values to attend to
_Store = Callable[[int, torch.Tensor, torch.Tensor], _KV]
# attend(queries [B, H, L, D], keys, values) -> [B, L, H, D]
_Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# mix(layer index, fused qkv projection [B, L, 3C]) -> attention output [B, L, H, D]
_Mix = Callable[[int, torch.Tensor], torch.Tensor]


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

        hidden = self._layers(x, self._rope_store_attend(rope, store, _masked_attention(attn_mask)))
        cache.length = end
        return hidden

    def new_slot_cache(self, slots: int, positions: int) -> SlotCache:
        shape = (slots, positions, self.heads, self.head_dim)
        device = self.norm.device
        return SlotCache(keys=[torch.zeros(shape, dtype=self.dtype, device=device)
                               for _ in self.layers],
                         values=[torch.zeros(shape, dtype=self.dtype, device=device)
                                 for _ in self.layers])

    def attention_reads_prefix_only(self) -> bool:
        """Whether a decode step's attention reads each slot's own prefix whatever ``attend`` is
        (the Triton path): then one graph per live-slot count serves every length."""
        return _use_triton(self.norm, self.dtype)

    def forward_slots(self, x: torch.Tensor, rope_at: torch.Tensor, cache: SlotCache,
                      write_at: torch.Tensor, attend: int) -> torch.Tensor:
        """One decode position for each of the first B slots of ``cache`` (B = len(write_at)).

        Slot i holds its sentence from cache position 0 on; its new token has RoPE position
        ``rope_at[i]``, writes its key/value at ``write_at[i]`` and attends to positions
        [0, write_at[i]] (all < ``attend``). Every shape depends only on (B, attend) and nothing
        reads back to the host, so a CUDA graph can hold it. Returns [B, 1, C].
        """
        if _use_triton(write_at, self.dtype):
            return self._layers(x, self._triton_decode(rope_at, cache, write_at, attend))
        rows = write_at.shape[0]
        at = write_at.view(rows, 1, 1, 1).expand(rows, 1, self.heads, self.head_dim)

        def store(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
            slot_keys, slot_values = cache.keys[index][:rows], cache.values[index][:rows]
            slot_keys.scatter_(1, at, keys.transpose(1, 2))  # [B, H, 1, D] -> [B, 1, H, D]
            slot_values.scatter_(1, at, values.transpose(1, 2))
            return slot_keys, slot_values

        attention = _slot_attention(write_at, attend, self.dtype)
        return self._layers(x, self._rope_store_attend(self.rope(rope_at.unsqueeze(1)), store,
                                                       attention))

    def _layers(self, x: torch.Tensor, mix: _Mix) -> torch.Tensor:
        with sdpa_kernel(_ATTENTION_BACKENDS):
            for i, layer in enumerate(self.layers):
                x = x + self._attention(layer, x, mix, i)
                h = F.rms_norm(x, (self.hidden,), layer.ln_mlp, layer.eps)
                gate, up = layer.gate_up(h).chunk(2, dim=-1)
                x = x + layer.down(F.silu(gate) * up)
        return F.rms_norm(x, (self.hidden,), self.norm, self.eps)

    def _attention(self, layer: FusedLlamaLayer, x: torch.Tensor, mix: _Mix,
                   index: int) -> torch.Tensor:
        rows, steps, _ = x.shape
        h = F.rms_norm(x, (self.hidden,), layer.ln_attn, layer.eps)
        out = mix(index, layer.qkv(h))  # [B, L, H, D]
        return layer.o(out.reshape(rows, steps, self.hidden))

    def _rope_store_attend(self, rope: tuple[torch.Tensor, torch.Tensor], store: _Store,
                           attention: _Attend) -> _Mix:
        """The plain PyTorch path: RoPE on q and k, cache write, attention."""

        def mix(index: int, qkv: torch.Tensor) -> torch.Tensor:
            rows, steps, _ = qkv.shape
            qkv = qkv.view(rows, steps, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            qk = _apply_rope(qkv[:2], *rope)  # [2, B, H, L, D]
            keys, values = store(index, qk[1], qkv[2])
            return attention(qk[0], keys, values)

        return mix

    def _triton_decode(self, rope_at: torch.Tensor, cache: SlotCache, write_at: torch.Tensor,
                       attend: int) -> _Mix:
        """The GPU decode path: RoPE + cache write in one kernel, then the prefix attention."""
        rows = write_at.shape[0]
        cos, sin = self.rope_cos[rope_at], self.rope_sin[rope_at]  # float32 [B, D]
        used = (write_at + 1).to(torch.int32)

        def mix(index: int, qkv: torch.Tensor) -> torch.Tensor:
            keys, values = cache.keys[index][:rows], cache.values[index][:rows]
            query = decode_attention.rope_and_store(qkv[:, 0], cos, sin, keys, values, write_at)
            out = decode_attention.decode_attention(query, keys, values, used)
            return out.unsqueeze(1)

        return mix


@dataclass
class SlotCache:
    """Per-layer keys and values of the decode slots, [N, P, H, D]: slot-major and position-major,
    so that the first B slots are one contiguous block the Triton kernels index by slot and
    position."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @property
    def positions(self) -> int:
        return self.keys[0].shape[1]


def _use_triton(on: torch.Tensor, dtype: torch.dtype) -> bool:
    return (DECODE_ATTENTION == "triton" and on.is_cuda
            and dtype in (torch.float16, torch.bfloat16) and decode_attention.available())


def _masked_attention(attn_mask: torch.Tensor | None) -> _Attend:
    """SDPA over [B, H, S, D] keys with an additive mask; returns [B, L, H, D]."""

    def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(query, keys, values, attn_mask=attn_mask)
        return out.transpose(1, 2)

    return attend


def _slot_attention(write_at: torch.Tensor, attend: int, dtype: torch.dtype) -> _Attend:
    """Attention of one query per slot over its own cache prefix [0, write_at], when the Triton
    path is off (CPU, fp32): SDPA with a length mask over the first ``attend`` positions.
    Keys/values arrive as [B, P, H, D]."""
    allowed = torch.arange(attend, device=write_at.device) <= write_at.unsqueeze(1)
    mask = additive_mask(allowed, dtype)[:, None, None, :]

    def masked(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        keys, values = keys[:, :attend].transpose(1, 2), values[:, :attend].transpose(1, 2)
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=mask).transpose(1, 2)

    return masked


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

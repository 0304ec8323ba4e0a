"""The ChatTTS GPT (an HF ``LlamaModel``) re-run as a lean decoder with a static KV cache.

Upstream calls the HF model every step with a ``DynamicCache`` that grows by concatenation, builds
masks and position ids on the host, and syncs on every step. Here the same weights run through a
minimal Llama block: fused QKV and gate/up projections, one RoPE table looked up per step, and
two cache layouts: ``KVCache`` for a prefill (all rows at once), ``SlotCache`` for the decode
slots (each slot its own length; on the GPU read by the Triton kernels of `decode_attention.py`;
int8 with a scale per vector where ``EngineConfig.kv_cache`` asks for it), both in `kv_cache.py`.

Shapes: B rows, S cache positions, H heads, D head width, C = H * D hidden width.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import pipeline.engine.decode_attention as decode_attention
import pipeline.engine.kv_int8 as kv_int8
import pipeline.engine.layer_kernels as layer_kernels
import pipeline.engine.layer_ops as layer_ops
import pipeline.engine.word_attention as word_attention
from pipeline.engine.kv_cache import KV, KVCache, SlotCache
from pipeline.engine.llama_layer import FusedLlamaLayer, plus_product

log = logging.getLogger(__name__)

# Not cuDNN attention: on Hopper it is chosen for fp16/bf16 and builds a new execution plan for
# every new KV length, i.e. on every decode step (20+ s per first pass on the H200, docs/engine.md).
_ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# Decode-step attention on CUDA in half precision: "triton" (decode_attention.py, the default) or
# "sdpa" (masked SDPA, also the CPU and fp32 path). Set by EngineTuning; docs/engine.md
# has what each measures (FlashAttention's variable-length kernel is no faster than SDPA here).
DECODE_ATTENTION = "triton"
# The decode slots' KV cache: "int8" (kv_int8.py), "model" (the model's dtype), or "auto": int8
# where the Triton decode path runs (CUDA, fp16/bf16), the model's dtype elsewhere. Measured
# speed and fidelity of each: docs/engine.md.
KV_CACHE = "auto"
KV_CACHE_CHOICES = ("auto", "int8", "model")
# The GPU path's small ops between GEMMs as Triton kernels (layer_kernels.py: SiLU x up normalising
# its input, the last add + the final RMSNorm): True (default) or False (the PyTorch ops, for an A/B).
FUSED_LAYERS = True


_KV = KV
# store(layer index, new keys, new values) -> the keys and values to attend to
_Store = Callable[[int, torch.Tensor, torch.Tensor], _KV]
# sink(layer index, keys, values [B, H, L, D]): a prefill's keys and values taken layer by layer
# (into the decode slots' cache) instead of kept in a KVCache of every layer
LayerSink = Callable[[int, torch.Tensor, torch.Tensor], None]
# mix(layer index, fused qkv projection [B, L, 3C], the residual [B, L, C] it was projected from,
# or None where it was projected from the normalised rows) -> attention output [B, L, H, D]
_Mix = Callable[[int, torch.Tensor, torch.Tensor | None], torch.Tensor]


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
        cos, sin = layer_ops.rope_tables(hf_model, int(config.max_position_embeddings))
        self.register_buffer("rope_cos", cos, persistent=False)  # [max_positions, D], fp32
        self.register_buffer("rope_sin", sin, persistent=False)
        self.kv_cache = KV_CACHE  # read by quantized_kv(); tests set it per model

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
                attn_mask: torch.Tensor, cache: KVCache | LayerSink) -> torch.Tensor:
        """Run ``x`` [B, L, C] at cache positions [cache.length, cache.length + L) (prefill).

        ``attn_mask`` is additive, [B, 1, L, cache.length + L]. Returns the final-norm hidden
        states [B, L, C] and advances ``cache.length`` by L. A ``LayerSink`` instead of a cache
        takes each layer's keys and values as they are made (a prefill from position 0): one
        layer's fp16 keys and values live at a time, not every layer's.
        """
        attention = layer_ops.masked_attention(attn_mask)
        if not isinstance(cache, KVCache):
            sink = cache

            def hand_on(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
                sink(index, keys, values)
                return keys, values

            return self._layers(x, self._rope_store_attend(rope, hand_on, attention))
        start, end = cache.length, cache.length + x.shape[1]

        def store(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
            cache.keys[index][:, :, start:end] = keys
            cache.values[index][:, :, start:end] = values
            return cache.keys[index][:, :, :end], cache.values[index][:, :, :end]

        hidden = self._layers(x, self._rope_store_attend(rope, store, attention))
        cache.length = end
        return hidden

    def new_slot_cache(self, slots: int, positions: int) -> SlotCache:
        shape = (slots, self.heads, positions, self.head_dim)
        device = self.norm.device
        if not self.quantized_kv():
            return SlotCache(keys=[torch.zeros(shape, dtype=self.dtype, device=device)
                                   for _ in self.layers],
                             values=[torch.zeros(shape, dtype=self.dtype, device=device)
                                     for _ in self.layers])

        def int8() -> list[torch.Tensor]:
            return [torch.zeros(shape, dtype=torch.int8, device=device) for _ in self.layers]

        def scales() -> list[torch.Tensor]:
            return [torch.zeros(shape[:3], dtype=kv_int8.SCALE_DTYPE, device=device)
                    for _ in self.layers]

        return SlotCache(keys=int8(), values=int8(), key_scales=scales(), value_scales=scales(),
                         dtype=self.dtype)

    def quantized_kv(self) -> bool:
        """Whether the decode slots keep their keys and values in int8 (``KV_CACHE``)."""
        if self.kv_cache == "auto":
            return _use_triton(self.norm, self.dtype)
        return self.kv_cache == "int8"

    def kv_bytes_per_position(self) -> int:
        """Bytes of keys and values one slot position holds, over all layers."""
        if self.quantized_kv():
            return 2 * len(self.layers) * (self.hidden + kv_int8.scale_bytes() * self.heads)
        return 2 * len(self.layers) * self.hidden * (torch.finfo(self.dtype).bits // 8)

    def attention_reads_prefix_only(self) -> bool:
        """Whether a decode step's attention reads each slot's own prefix whatever ``attend`` is
        (the Triton path): then one graph per live-slot count serves every length."""
        return _use_triton(self.norm, self.dtype)

    def forward_slots(self, x: torch.Tensor, rope_at: torch.Tensor, cache: SlotCache,
                      write_at: torch.Tensor, attend: int, live: torch.Tensor | None = None) -> torch.Tensor:
        """One decode position for each of the first B slots of ``cache`` (B = len(write_at)).

        Slot i holds its sentence from cache position 0 on; its new token has RoPE position
        ``rope_at[i]``, writes its key/value at ``write_at[i]`` and attends to positions
        [0, write_at[i]] (all < ``attend``); on the GPU only where ``live[i]`` (its output is not
        read otherwise: ``decode_attention.attended_lengths``). Every shape depends only on
        (B, attend) and nothing reads back to the host, so a CUDA graph can hold it. Returns [B, 1, C].
        """
        if _use_triton(write_at, self.dtype):
            return self._layers(x, self._triton_decode(rope_at, cache, write_at, attend, live))
        rows = write_at.shape[0]

        def store(index: int, keys: torch.Tensor, values: torch.Tensor) -> _KV:
            cache.scatter(index, write_at, keys, values)
            return cache.read(index, rows, attend)

        attention = layer_ops.slot_attention(write_at, attend, self.dtype)
        return self._layers(x, self._rope_store_attend(self.rope(rope_at.unsqueeze(1)), store, attention))

    def _layers(self, x: torch.Tensor, mix: _Mix) -> torch.Tensor:
        """Every layer on ``x`` [B, L, C]; returns the final-norm hidden states. On the GPU path
        each norm is deferred into the kernel that reads its projection and each residual add
        rides in a GEMM (llama_layer.py): 6 kernels a layer where ``layer_kernels`` runs.
        Elsewhere the PyTorch ops normalise first (the norms' weights are in the projections)."""
        if not _use_triton(x, self.dtype):
            return self._normalised_layers(x, mix)
        gated, add_norm = ((layer_kernels.silu_mul, layer_kernels.add_rms_norm)
                           if _fused_layers(x, self.dtype) else (layer_ops.silu_mul, layer_ops.add_rms_norm))
        last = len(self.layers) - 1
        with sdpa_kernel(_ATTENTION_BACKENDS):
            for i, layer in enumerate(self.layers):  # x is the stack's own after the first add
                x = plus_product(x, layer.o, self._attention(layer, x, x, mix, i), in_place=i > 0)
                act = gated(layer.gate_up(x), x, self.eps)
                if i == last:
                    return add_norm(x, layer.down(act), self.norm, self.eps)[1]
                x = plus_product(x, layer.down, act, in_place=True)
        return F.rms_norm(x, (self.hidden,), self.norm, self.eps)  # no layers

    def _normalised_layers(self, x: torch.Tensor, mix: _Mix) -> torch.Tensor:
        """The PyTorch path: each residual add, then its RMSNorm (weightless: the weight is in the
        next projection), then the projections of the normalised rows."""
        with sdpa_kernel(_ATTENTION_BACKENDS):
            h = F.rms_norm(x, (self.hidden,), None, self.eps)
            for i, layer in enumerate(self.layers):
                x, h = layer_ops.add_rms_norm(x, layer.o(self._attention(layer, h, None, mix, i)), None, self.eps)
                norm = self.norm if i == len(self.layers) - 1 else None  # the final norm after the last
                x, h = layer_ops.add_rms_norm(x, layer.down(layer_ops.silu_mul(layer.gate_up(h))), norm, self.eps)
        return h

    def _attention(self, layer: FusedLlamaLayer, h: torch.Tensor, residual: torch.Tensor | None,
                   mix: _Mix, index: int) -> torch.Tensor:
        """The attention block on ``h`` [B, L, C] (the normalised input, or the ``residual`` itself)
        before its output projection: [B, L, C]."""
        rows, steps, _ = h.shape
        return mix(index, layer.qkv(h), residual).reshape(rows, steps, self.hidden)

    def _rope_store_attend(self, rope: tuple[torch.Tensor, torch.Tensor], store: _Store,
                           attention: layer_ops.Attend) -> _Mix:
        """The plain PyTorch path: RoPE on q and k, cache write, attention; a prefill on the GPU
        in half precision takes RoPE and the heads' layout in one kernel (``layer_kernels.rope_heads``)."""

        def mix(index: int, qkv: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
            if _fused_layers(qkv, self.dtype):  # the norm and RoPE in one pass
                query, keys, values = layer_kernels.rope_heads(qkv, residual, self.eps, *rope, self.heads)
                return attention(query, *store(index, keys, values))
            if residual is not None:  # projected from the raw rows: the norm first
                qkv = (qkv.float() * layer_ops.rms_scale(residual, self.eps)).to(qkv.dtype)
            rows, steps, _ = qkv.shape
            qkv = qkv.view(rows, steps, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            qk = layer_ops.apply_rope(qkv[:2], *rope)  # [2, B, H, L, D]
            keys, values = store(index, qk[1], qkv[2])
            return attention(qk[0], keys, values)

        return mix

    def _triton_decode(self, rope_at: torch.Tensor, cache: SlotCache, write_at: torch.Tensor,
                       attend: int, live: torch.Tensor | None) -> _Mix:
        """The GPU decode path: RoPE + cache write in one kernel, then the prefix attention (or
        all three in one: ``word_attention.ROPE_INSIDE``)."""
        rows = write_at.shape[0]
        cos, sin = self.rope_cos[rope_at], self.rope_sin[rope_at]  # float32 [B, D]
        used = decode_attention.attended_lengths(write_at, live)

        rope_inside = word_attention.ROPE_INSIDE and cache.quantized and decode_attention.KERNEL == "words"
        order = word_attention.longest_first(used) if rope_inside and word_attention.LONGEST_FIRST else None

        def mix(index: int, qkv: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
            keys, values = cache.keys[index][:rows], cache.values[index][:rows]
            scales = ((cache.key_scales[index][:rows], cache.value_scales[index][:rows])
                      if cache.quantized else (None, None))
            raw = (qkv[:, 0], residual[:, 0], self.eps)  # the norm inside: a projection of the raw rows
            if rope_inside:
                return word_attention.rope_word_attention(*raw, cos, sin, keys, values, write_at, used,
                                                          *scales, order=order).unsqueeze(1)
            query = decode_attention.rope_and_store(*raw, cos, sin, keys, values, write_at, *scales)
            out = decode_attention.decode_attention(query, keys, values, used, *scales)
            return out.unsqueeze(1)

        return mix


def _fused_layers(on: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether a layer's small ops run as ``layer_kernels``' Triton kernels (``FUSED_LAYERS``)."""
    return FUSED_LAYERS and _use_triton(on, dtype) and layer_kernels.available()


def _use_triton(on: torch.Tensor, dtype: torch.dtype) -> bool:
    return (DECODE_ATTENTION == "triton" and on.is_cuda
            and dtype in (torch.float16, torch.bfloat16) and decode_attention.available())

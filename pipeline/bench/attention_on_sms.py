"""The engine's word attention kept to some of a GPU's SMs, for ``bench halves``.

Two streams' kernels overlap only where each finds SMs free: the word kernel's 12,288 programs
fill every SM until the layer's attention ends, and a cuBLAS GEMM's block on Hopper takes a whole
SM, so a GEMM launched beside the attention waits for it (``bench halves``: two halves at once
1.03x one stream's time on an H100). Here the same per-(slot, head) work (``word_attention.attend_slot_head``,
the engine's own loop) is done by persistent programs: each reads the SM it landed on (``%smid``)
and ends at once unless that SM is allowed (``allowed``, a 0/1 table by SM); those that stay take
(slot, head) items from a counter until none is left. The other SMs are left to the other
stream's GEMMs. Is the cache still read near the copy ceiling from fewer SMs? On an H100
(2026-12-07) with 24 programs an SM: yes, 2.30 / 2.31 / 2.39-2.42 ms a step's worth on 132 / 88 /
66 SMs against the engine kernel's 2.25 on all (with 8 programs an SM: 2.52 / 3.11 / 3.94, starved
of loads in flight), so the attention needs half the SMs, not all: the GEMMs could have the rest.
Measuring only: the engine keeps its own kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from pipeline.engine import word_attention
from pipeline.engine.triton_import import compiled, in_flight, tl, triton

PROGRAMS_PER_SM = 24  # launched per SM of the GPU; those on allowed SMs stay (one warp each; 8 starve
# the loads: 3.94 against 2.39 ms on 66 SMs of an H100)

if triton is not None:  # pragma: no cover - Triton code
    from pipeline.engine.word_attention import attend_slot_head

    @triton.jit
    def _this_sm(ASM: tl.constexpr):
        """The SM this program runs on (%smid); 0 under the interpreter (no PTX there)."""
        if ASM:
            return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        else:
            return 0

    @triton.jit
    def _word_attention_on_sms(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr, next_ptr, scale, items, allowed_ptr,
                               stride_qb, stride_qh, stride_kb, stride_kh, stride_kp,
                               stride_sb, stride_sh, stride_ob, stride_oh, HEADS: tl.constexpr,
                               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ASM: tl.constexpr,
                               STAGES: tl.constexpr, PAIRED: tl.constexpr):
        if tl.load(allowed_ptr + _this_sm(ASM)) != 0:
            item = tl.atomic_add(next_ptr, 1)
            while item < items:
                attend_slot_head(item // HEADS, item % HEADS, q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, used_ptr,
                                 scale, stride_qb, stride_qh, stride_kb, stride_kh, stride_kp, stride_sb, stride_sh,
                                 stride_ob, stride_oh, BLOCK_N, HEAD_DIM, ASM, STAGES, PAIRED)
                item = tl.atomic_add(next_ptr, 1)


def first_sms(sms: int, device: torch.device) -> torch.Tensor:
    """The ``allowed`` table of SMs 0..``sms`` - 1 (int32, one entry per SM of the device; a CPU: 1)."""
    count = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    return (torch.arange(count, device=device) < sms).to(torch.int32)


def attention_on_sms(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, used: torch.Tensor,
                     key_scales: torch.Tensor, value_scales: torch.Tensor, allowed: torch.Tensor,
                     counter: torch.Tensor, programs: int) -> torch.Tensor:
    """``word_attention.word_decode_attention``'s output, computed only on the SMs ``allowed``
    (int32 [SMs], nonzero where allowed; ``first_sms``) by ``programs`` launched programs;
    ``counter`` (int32 [1], the caller's) is zeroed here first, so that a CUDA graph of this call
    replays it whole."""
    rows, heads, dim = query.shape
    key_words, value_words = keys.view(torch.int32), values.view(torch.int32)
    out = torch.empty_like(query)
    counter.zero_()
    _word_attention_on_sms[(programs,)](
        query, key_words, value_words, key_scales, value_scales, out, used, counter, 1.0 / math.sqrt(dim),
        rows * heads, allowed, query.stride(0), query.stride(1),
        key_words.stride(0), key_words.stride(1), key_words.stride(2),
        key_scales.stride(0), key_scales.stride(1), out.stride(0), out.stride(1),
        HEADS=heads, BLOCK_N=word_attention.BLOCK_POSITIONS, HEAD_DIM=dim, ASM=compiled(), STAGES=in_flight(word_attention.STAGES),
        PAIRED=word_attention._paired(key_scales), num_warps=word_attention.WARPS)
    return out


def layer_attention(rows: int, attend: int, heads: int, dim: int, device: torch.device,
                    allowed: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    """One layer's attention of ``rows`` slots: the engine's word kernel on a GPU (only on the SMs
    ``allowed``, a 0/1 table by SM, where given: ``attention_on_sms``), the float32 reference over
    the dequantized cache on a CPU (the smoke mode: no Triton needed)."""
    from pipeline.bench.attention import inputs, reference

    tensors = inputs(rows, attend, device, heads=heads, dim=dim)
    if device.type != "cuda":
        return lambda: reference(*tensors).half()
    if allowed is not None:
        counter, programs = torch.zeros(1, dtype=torch.int32, device=device), allowed.numel() * PROGRAMS_PER_SM
        return lambda: attention_on_sms(*tensors, allowed=allowed, counter=counter, programs=programs)
    return lambda: word_attention.word_decode_attention(*tensors)

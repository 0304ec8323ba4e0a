"""One Llama decoder layer's weights as the engine runs them: the projections fused (qkv: C -> 3C,
gate_up: C -> 2I) and each RMSNorm's weight folded into the projection that reads the norm.

Why the fold: RMSNorm(x) * g projected by W is (W * g) projected from x, times 1 / RMS(x), a
factor per row. So a layer needs no kernel of its own to normalise: the projection reads the raw
residual, and the kernel that reads the projection anyway (the decode step's RoPE + attention,
the prefill's RoPE, the MLP's SiLU x up) multiplies by the row's factor, which it takes from the
residual row (``attention_block.rms_scale``); the residual add itself rides in the next GEMM
(``plus_product``: cuBLAS adds it in its epilogue). On the GPU path that is 6 kernels a layer, not
8 (gpt.py). The PyTorch path normalises first, as before, leaving the norm's weight out (it is in
the projection). In half precision a raw projection is the normalised one times the row's RMS:
the residual itself is half precision either way, and the product stays within fp16's range
while RMS x |projection| < 65,504 (the bench's fidelity: top-1 0.9971 against 0.9970 before).
"""

from __future__ import annotations

import torch
from torch import nn


class FusedLlamaLayer(nn.Module):
    """One Llama decoder layer with its projections fused and its norms' weights folded in."""

    def __init__(self, hf_layer: nn.Module, eps: float) -> None:
        super().__init__()
        attn, mlp = hf_layer.self_attn, hf_layer.mlp
        self.qkv = _fused_linear(hf_layer.input_layernorm.weight, attn.q_proj, attn.k_proj, attn.v_proj)
        self.o = _fused_linear(None, attn.o_proj)
        self.gate_up = _fused_linear(hf_layer.post_attention_layernorm.weight, mlp.gate_proj, mlp.up_proj)
        self.down = _fused_linear(None, mlp.down_proj)
        self.eps = eps


def plus_product(x: torch.Tensor, linear: nn.Module, inputs: torch.Tensor, *, in_place: bool) -> torch.Tensor:
    """x + linear(inputs) for x [..., C]: one GEMM that adds x in its epilogue (cuBLAS's beta = 1)
    where ``linear`` is a plain half-precision weight without a bias; the two ops otherwise (INT8
    weights, say). ``in_place``: into x itself (x contiguous and the caller's own). Out of place,
    PyTorch copies x into the new tensor first (a device-to-device copy before each GEMM: 2 a
    layer cost an H100 more than the fold saved), so a layer stack copies once and adds in place."""
    weight = getattr(linear, "weight", None)
    plain = (isinstance(linear, nn.Linear) and linear.bias is None and weight is not None
             and type(weight.detach()) is torch.Tensor and weight.dtype == x.dtype)
    if not plain:
        return x.add_(linear(inputs)) if in_place else x + linear(inputs)
    rows, products = x.reshape(-1, x.shape[-1]), inputs.reshape(-1, inputs.shape[-1])
    if in_place:
        rows.addmm_(products, weight.t())
        return x
    return torch.addmm(rows, products, weight.t()).view(x.shape)


def _fused_linear(norm_weight: torch.Tensor | None, *layers: nn.Linear) -> nn.Linear:
    """One Linear whose output is the concatenation of ``layers``' outputs (one GEMM, not three),
    its input columns times ``norm_weight`` where the layer reads an RMSNorm's output (the norm's
    weight folded in, in float32, rounded once)."""
    weight = torch.cat([layer.weight.detach() for layer in layers], 0)  # a copy, even of one
    if norm_weight is not None:
        weight = (weight.float() * norm_weight.detach().float()[None, :]).to(weight.dtype)
    has_bias = layers[0].bias is not None
    bias = torch.cat([layer.bias.detach() for layer in layers], 0) if has_bias else None
    return _linear_of(weight, bias)


def _linear_of(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    """A Linear holding these tensors, built on the meta device: no random initialisation to
    overwrite (seconds for the full model on a CPU)."""
    with torch.device("meta"):
        out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    out.weight = nn.Parameter(weight)
    if bias is not None:
        out.bias = nn.Parameter(bias)
    return out

"""The GPT's weights (``asset/gpt``) in HF ``LlamaModel``'s layout, without transformers.

``LlamaWeights`` holds the tensors under the names HF saves them with and computes the rotary
tables as HF's default RoPE does; ``FusedLlama`` takes its weights from it. It runs nothing itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.engine.modules.state import REDOWNLOAD, build_empty, file_shapes, load_into
from pipeline.errors import ModelError

# In the file, never used: upstream deletes the token table (prompts are embedded by Embed), and
# older transformers releases saved the rotary frequencies, which are recomputed here.
UNUSED_KEYS = ("embed_tokens.weight",)
UNUSED_SUFFIX = "rotary_emb.inv_freq"


@dataclass(frozen=True)
class LlamaSettings:
    """What ``asset/gpt/config.json`` says, under HF ``LlamaConfig``'s names."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope_theta: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def read_settings(path: Path) -> LlamaSettings:
    """Raises ModelError naming ``path`` when it is not a Llama config the engine can run."""
    try:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        heads = int(raw["num_attention_heads"])
        settings = LlamaSettings(
            hidden_size=int(raw["hidden_size"]), intermediate_size=int(raw["intermediate_size"]),
            num_attention_heads=heads, num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)), rope_theta=_rope_theta(raw))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{path}: not a readable Llama config ({exc}); {REDOWNLOAD}") from exc
    if raw.get("attention_bias") or raw.get("mlp_bias"):
        raise ModelError(f"{path}: a GPT with biases is not chattts 0.2.5's; {REDOWNLOAD}")
    if raw.get("head_dim") not in (None, settings.head_dim):
        raise ModelError(f"{path}: head_dim {raw['head_dim']} is not hidden_size / heads; {REDOWNLOAD}")
    return settings


def _rope_theta(raw: dict[str, Any]) -> float:
    """The RoPE base: transformers 5 writes ``rope_parameters``, earlier releases ``rope_theta``
    and ``rope_scaling``. Only the default (unscaled) RoPE is upstream's."""
    parameters = raw.get("rope_parameters") or {}
    scaling = raw.get("rope_scaling") or {}
    kind = parameters.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default":
        raise ValueError(f"RoPE of type {kind!r}, only the default one is supported")
    return float(parameters.get("rope_theta", raw.get("rope_theta", 10000.0)))


class _Projections(nn.Module):
    def __init__(self, names: tuple[str, ...], shapes: tuple[tuple[int, int], ...]) -> None:
        super().__init__()
        for name, (out_features, in_features) in zip(names, shapes):
            self.add_module(name, nn.Linear(in_features, out_features, bias=False))


class _RmsNormWeight(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))


class _Layer(nn.Module):
    def __init__(self, s: LlamaSettings) -> None:
        super().__init__()
        c, i = s.hidden_size, s.intermediate_size
        self.self_attn = _Projections(("q_proj", "k_proj", "v_proj", "o_proj"), ((c, c),) * 4)
        self.mlp = _Projections(("gate_proj", "up_proj", "down_proj"), ((i, c), (i, c), (c, i)))
        self.input_layernorm = _RmsNormWeight(c)
        self.post_attention_layernorm = _RmsNormWeight(c)


class RotaryTable(nn.Module):
    """HF's default ``LlamaRotaryEmbedding``: the same frequencies, computed the same way."""

    def __init__(self, settings: LlamaSettings, device: torch.device) -> None:
        super().__init__()
        dim = settings.head_dim
        # on the host in float32, then moved, as HF builds the buffer before the model is moved
        inv_freq = 1.0 / (settings.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq.to(device), persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class LlamaWeights(nn.Module):
    """``asset/gpt/model.safetensors`` under HF ``LlamaModel``'s tensor names."""

    def __init__(self, settings: LlamaSettings) -> None:
        super().__init__()
        self.config = settings
        self.layers = nn.ModuleList(_Layer(settings) for _ in range(settings.num_hidden_layers))
        self.norm = _RmsNormWeight(settings.hidden_size)


def load_llama(folder: Path, device: torch.device) -> LlamaWeights:
    """The GPT's weights from ``folder`` (config.json, model.safetensors) on ``device``."""
    settings = read_settings(folder / "config.json")
    weights = build_empty(lambda: LlamaWeights(settings))
    path = folder / "model.safetensors"
    unused = [k for k in file_shapes(path) if k in UNUSED_KEYS or k.endswith(UNUSED_SUFFIX)]
    load_into(weights, path, device, unused=unused)
    weights.rotary_emb = RotaryTable(settings, device)  # read by FusedLlama for its RoPE tables
    return weights

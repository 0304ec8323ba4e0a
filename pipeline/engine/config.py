"""What an engine is built from. Plain data, no torch: ``import pipeline.engine`` stays light."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EngineConfig:
    """Where the weights are and how to run them.

    device: "auto" (CUDA when present), "cpu", "cuda" or "cuda:N".
    precision: "auto" (fp16 on CUDA; on CPU int8 for full-size weights and fp32 for tiny test
    weights, as measured in docs/engine.md), "fp32", "fp16", "bf16", "int8" (INT8 GPT linears:
    torchao weight-only on CUDA, torch.ao dynamic on CPU).
    kv_cache: the decode slots' keys and values: "auto" (int8 on the GPU's fp16/bf16 path, the
    model's dtype elsewhere; docs/engine.md has what it costs in fidelity), "int8", "model".
    None: ``TTS_JOBS_KV_CACHE`` (default "auto").
    memory_gib: on CUDA, the most GPU memory this process may use (a hard cap, as a smaller card
    would have): the planner's batches and the decode slots are sized from it. None: the card.
    """

    model_dir: Path | None = None  # None: the Hugging Face cache of 2Noise/ChatTTS
    device: str = "auto"
    precision: str = "auto"
    kv_cache: str | None = None
    memory_gib: float | None = None

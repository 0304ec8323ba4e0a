"""The synthesis engine: ChatTTS behind a batched, per-row generation loop.

``import pipeline.engine`` stays light (no torch): the heavy modules load inside ``load_engine`` and
on first access to ``Engine``.

Usage::

    engine = load_engine(EngineConfig(model_dir=Path("models/chattts"), device="cuda"))
    engine.warm_up()
    voice = engine.sample_voice(seed=7)
    results = synthesize_with_oom_halving(engine, requests, on_split=learned_limit.update)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.engine.engine import Engine
    from pipeline.types import SynthesisRequest, SynthesisResult

__all__ = ["Engine", "EngineConfig", "load_engine", "synthesize_with_oom_halving"]


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
    """

    model_dir: Path | None = None  # None: the Hugging Face cache of 2Noise/ChatTTS
    device: str = "auto"
    precision: str = "auto"
    kv_cache: str | None = None


def load_engine(config: EngineConfig) -> Engine:
    """Locate (and for real weights, verify) the weights and load the model once."""
    from pipeline.engine.loading import load_engine as _load

    return _load(config)


def synthesize_with_oom_halving(
    engine: Any,
    requests: Sequence[SynthesisRequest],
    on_split: Callable[[int], None] | None = None,
    on_waveform: Callable[[int, Any], None] | None = None,
) -> list[SynthesisResult]:
    """``engine.synthesize`` that halves the batch on CUDA out-of-memory (see ``oom.py``)."""
    from pipeline.engine.oom import synthesize_with_oom_halving as _run

    return _run(engine, requests, on_split, on_waveform)


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from pipeline.engine.engine import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

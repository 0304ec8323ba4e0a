"""The synthesis engine: ChatTTS behind a batched, per-row generation loop.

``import pipeline.engine`` stays light (no torch): the heavy modules load inside ``load_engine`` and
on first access to ``Engine``.

Usage::

    engine = load_engine(EngineConfig(model_dir=Path("models/chattts"), device="cuda"))
    engine.warm_up()
    voice = engine.sample_voice(seed=7)
    outcomes, fit = synthesize_fitting(engine, requests)  # within the device's memory: oom.py
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.engine.config import EngineConfig

if TYPE_CHECKING:
    from pipeline.engine.engine import Engine

__all__ = ["Engine", "EngineConfig", "load_engine"]


def load_engine(config: EngineConfig) -> Engine:
    """Locate (and for real weights, verify) the weights and load the model once."""
    from pipeline.engine.loading import load_engine as _load

    return _load(config)


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from pipeline.engine.engine import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

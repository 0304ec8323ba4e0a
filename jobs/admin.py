"""Administration use cases behind `tts-jobs model ...` and `tts-jobs bench`: the model's weights
and the synthesis benchmark. (The database schema is ``runtime.upgrade_database``; voices are
``voices.py``.)"""

from __future__ import annotations

from pathlib import Path


def synthetic_weights_warning() -> str:
    """What every user of synthetic weights must read: they make noise, never speech."""
    from pipeline.engine.weights import NOISE_WARNING

    return NOISE_WARNING


def write_synthetic_model(target: Path, size: str = "tiny", seed: int = 0) -> Path:
    """ChatTTS weights with RANDOM values in the upstream layout (tests and benchmarks); returns
    their folder. The same size and seed always give the same files."""
    from pipeline.engine.weights import write_synthetic_weights

    return write_synthetic_weights(target, size=size, seed=seed).root


def download_model(target: Path | None = None) -> Path:
    """The real 2Noise/ChatTTS weights from Hugging Face (needs internet); returns their folder."""
    from pipeline.engine.weights import download_weights

    return download_weights(target)


def run_benchmark(argv: list[str]) -> int:
    """The measurement tools (``python -m pipeline.bench``), as `tts-jobs bench` is given them:
    the engine benchmark by default, another tool when its name comes first (the kernel choices
    of the environment applied). Returns the exit code."""
    from pipeline.bench.commands import main

    return main(argv, prog="tts-jobs bench")

"""Administration use cases behind `tts-jobs model ...` and `tts-jobs bench`: the model's weights
and the synthesis benchmark. (The database schema is ``runtime.upgrade_database``; voices are
``voices.py``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


def run_benchmark(options: Any) -> None:
    """The synthesis benchmark against upstream ChatTTS in the same run: prints its table, writes
    its JSON. ``options`` carries the benchmark's options by their long names (``model_dir``,
    ``synthetic``, ``precision``, ..., ``json``), as `tts-jobs bench` parses them."""
    from pipeline.bench.engine_bench import options_from, report_bench

    report_bench(*options_from(options))

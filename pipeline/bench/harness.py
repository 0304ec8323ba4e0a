"""What every benchmark row shares: the weights it loads, the device syncs around its timed region,
memory given back between rows, and the optional profile of that region."""

from __future__ import annotations

import contextlib
import gc
import logging
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.bench.protocol import BenchOptions

log = logging.getLogger(__name__)


@contextlib.contextmanager
def bench_weights(opts: BenchOptions) -> Iterator[tuple[Path, str]]:
    """(model directory, label for the report): the given directory, or synthetic weights written
    to a temporary one for the duration."""
    from pipeline.engine.weights import NOISE_WARNING, write_synthetic_weights

    if not opts.synthetic:
        if opts.model_dir is None:
            raise ValueError("give model_dir or synthetic")
        yield opts.model_dir, str(opts.model_dir)
        return
    with tempfile.TemporaryDirectory(prefix="tts-jobs-bench-") as folder:
        write_synthetic_weights(Path(folder), opts.synthetic, opts.seed)
        log.warning(NOISE_WARNING)
        yield Path(folder), f"synthetic {opts.synthetic} (seed {opts.seed})"


def sync_device(device: Any, reset_peak: bool = False) -> None:
    """Wait for the GPU (and start a new peak-memory window): timed regions end on finished work."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        if reset_peak:
            torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: Any) -> float | None:
    """Peak GPU memory since the last ``sync_device(reset_peak=True)``; None on CPU."""
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def release_device_memory() -> None:
    """Give a finished row's memory back, so that the next row's peak is its own. A loaded engine
    is frozen out of the collector's sight (``host_threads.spare_the_collector``): the objects
    are let back in first, or a dropped engine (the fp32 reference's ~2 GB on a full-size model)
    would stay on the GPU under every later row."""
    import torch

    gc.unfreeze()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def host_profile(label: str, profile_dir: Path | None = None,
                 trace_dir: Path | None = None) -> Iterator[None]:
    """With ``profile_dir`` (``--profile DIR``), cProfile the timed region (where the host time
    goes); with ``trace_dir`` (``--trace DIR``), record it with torch.profiler instead (every kernel
    and CUDA call on a timeline, for ``python -m pipeline.bench trace-gaps``). Either slows the run
    it watches."""
    if trace_dir is not None:
        with _device_trace(trace_dir / f"trace-{label}.json.gz"):
            yield
        return
    folder = profile_dir
    if folder is None:
        yield
        return
    import cProfile
    import pstats

    Path(folder).mkdir(parents=True, exist_ok=True)  # before the run, not after it
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        with open(Path(folder) / f"host-{label}.txt", "w") as out:
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)


@contextlib.contextmanager
def _device_trace(path: Path) -> Iterator[None]:
    from torch.profiler import ProfilerActivity, profile

    path.parent.mkdir(parents=True, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        yield
    prof.export_chrome_trace(str(path))


MEMORY_EVENTS = 3_000_000  # the allocator's history keeps this many (a full bench makes ~1 M)


@contextlib.contextmanager
def memory_history(folder: Path | None) -> Iterator[None]:
    """With ``folder`` (``--memory-history DIR``), keep the CUDA allocator's history (every
    allocation and free, with the Python frames that made it) over the block, print what held the
    peak (``memory_peak.report``) and write the history to ``folder/memory.pickle`` (for
    ``python -m pipeline.bench memory-peak`` or PyTorch's viewer). Nothing on a CPU."""
    import torch

    if folder is None or not torch.cuda.is_available():
        if folder is not None:
            log.warning("--memory-history: no CUDA device here, no allocator history kept")
        yield
        return
    Path(folder).mkdir(parents=True, exist_ok=True)  # before the run, not after it
    torch.cuda.memory._record_memory_history(max_entries=MEMORY_EVENTS, stacks="python")
    try:
        yield
    finally:
        from pipeline.bench.memory_peak import report

        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(Path(folder) / "memory.pickle", "wb") as out:
            pickle.dump(snapshot, out)
        print("\n".join(["What held the GPU's memory at its peak (--memory-history):",
                         *report(snapshot, top=20)]), flush=True)

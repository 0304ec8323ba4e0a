"""`tts-jobs run` loads the engine on a thread of its own (``EngineLoading``) while the book is
read. On a GPU that ran once the engine is ready as soon as it is loaded: the planner needs only
its device, precision and memory model, which that GPU kept (its calibration file), and the first
batch's slots load the kernels (an eager step before each capture). On a GPU that did not, a
warm-up batch measures the memory model first, and the run waits for it. A fake engine stands in
for the GPU's (none here): its warm-up is held until the test lets it go."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import jobs.runtime as runtime
from jobs.runtime import EngineLoading


class HeldWarmUp:
    """An engine on a GPU whose warm-up batch runs until ``finish`` is set."""

    def __init__(self, kept: bool, fails: bool = False) -> None:
        self.device = "cuda:0"
        self.kept, self.fails = kept, fails
        self.started, self.finish = threading.Event(), threading.Event()

    def take_kept_calibration(self, calibration_file: Path | None) -> bool:
        return self.kept

    def warm_up(self, calibration_file: Path | None = None) -> None:
        self.started.set()
        assert self.finish.wait(10)
        if self.fails:
            raise RuntimeError("warm-up broke")


def loading(monkeypatch: Any, engine: HeldWarmUp) -> EngineLoading:
    monkeypatch.setattr(runtime, "open_engine", lambda settings: engine)
    return EngineLoading(settings=type("Settings", (), {"calibration_file": None})())  # type: ignore[arg-type]


def test_a_gpu_that_kept_its_calibration_speaks_with_no_warm_up_batch(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=True)
    loader = loading(monkeypatch, engine)

    assert loader.get() is engine  # the warm-up would hold it until told
    assert not engine.started.is_set()


def test_without_a_kept_calibration_the_run_waits_for_the_warm_up_that_measures_it(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=False)
    loader = loading(monkeypatch, engine)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(loader.get()))
    waiter.start()
    assert engine.started.wait(5)
    waiter.join(0.5)
    assert waiter.is_alive()  # the warm-up measures the memory model the plan needs
    engine.finish.set()
    waiter.join(5)
    assert got == [engine]


def test_a_warm_up_that_fails_fails_the_run(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=False, fails=True)
    loader = loading(monkeypatch, engine)

    engine.finish.set()
    with pytest.raises(RuntimeError, match="warm-up broke"):
        loader.get()


def test_an_engine_that_cannot_load_fails_the_run(monkeypatch: Any) -> None:
    def broken(settings: Any) -> Any:
        raise RuntimeError("no weights there")

    monkeypatch.setattr(runtime, "open_engine", broken)
    loader = EngineLoading(settings=type("Settings", (), {"calibration_file": None})())  # type: ignore[arg-type]

    with pytest.raises(RuntimeError, match="no weights there"):
        loader.get()


def test_triton_hashes_itself_on_a_thread_of_its_own() -> None:
    """The cache key Triton computes at its first kernel launch (0.3-0.4 s on an H200 host) is
    computed beside the load, and the first launch finds it."""
    from triton.runtime.cache import triton_key

    from pipeline.engine.loading import hash_triton_beside

    triton_key.cache_clear()
    hash_triton_beside().join(60)
    hits = triton_key.cache_info().hits
    triton_key()
    assert triton_key.cache_info().hits == hits + 1

"""`tts-jobs run` loads the engine on a thread of its own (``EngineLoading``) while the book is
read; the planner needs only the engine's device, precision and memory model, which a GPU that
ran once has kept (its calibration file), so the book is planned while the warm-up batch still
runs, and the speaking waits for the warm-up. A fake engine stands in for the GPU's (none here):
its warm-up is held until the test lets it go."""

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
        self.took_kept = False

    def take_kept_calibration(self, calibration_file: Path | None) -> bool:
        self.took_kept = self.kept
        return self.kept

    def warm_up(self, calibration_file: Path | None = None) -> None:
        self.started.set()
        assert self.finish.wait(10)
        if self.fails:
            raise RuntimeError("warm-up broke")


def loading(monkeypatch: Any, engine: HeldWarmUp) -> EngineLoading:
    monkeypatch.setattr(runtime, "open_engine", lambda settings: engine)
    return EngineLoading(settings=type("Settings", (), {"calibration_file": None, "device": "cpu"})())  # type: ignore[arg-type]


def test_a_kept_calibration_lets_the_planner_in_while_the_warm_up_runs(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=True)
    loader = loading(monkeypatch, engine)

    assert loader.for_planning() is engine  # the warm-up has not finished
    assert engine.started.wait(5) and not engine.finish.is_set()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(loader.get()))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()  # the speaking waits for the warm-up
    engine.finish.set()
    waiter.join(5)
    assert got == [engine]


def test_without_a_kept_calibration_the_planner_waits_for_the_measured_one(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=False)
    loader = loading(monkeypatch, engine)
    planned: list[Any] = []
    planner = threading.Thread(target=lambda: planned.append(loader.for_planning()))
    planner.start()
    assert engine.started.wait(5)
    planner.join(0.5)
    assert planner.is_alive()  # the warm-up measures the memory model the plan needs
    engine.finish.set()
    planner.join(5)
    assert planned == [engine]


def test_a_warm_up_that_fails_fails_the_speaking_not_the_plan_already_made(monkeypatch: Any) -> None:
    engine = HeldWarmUp(kept=True, fails=True)
    loader = loading(monkeypatch, engine)

    assert loader.for_planning() is engine
    engine.finish.set()
    with pytest.raises(RuntimeError, match="warm-up broke"):
        loader.get()


def test_an_engine_that_cannot_load_is_said_to_the_planner_too(monkeypatch: Any) -> None:
    def broken(settings: Any) -> Any:
        raise RuntimeError("no weights there")

    monkeypatch.setattr(runtime, "open_engine", broken)
    loader = EngineLoading(settings=type("Settings", (), {"calibration_file": None, "device": "cpu"})())  # type: ignore[arg-type]

    with pytest.raises(RuntimeError, match="no weights there"):
        loader.for_planning()


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


@pytest.mark.parametrize(("device", "asked"), [("cuda:1", ["cuda:1"]), ("cpu", [])])
def test_on_a_gpu_the_driver_makes_the_context_while_the_engine_imports(monkeypatch: Any, device: str,
                                                                        asked: list[str]) -> None:
    """The CUDA context is asked of the driver (on its own thread) before the engine's load begins
    its imports, and only where the engine runs on a GPU."""
    import pipeline.engine.cuda_context as cuda_context

    order: list[str] = []
    monkeypatch.setattr(cuda_context, "open_context_beside", lambda name, wait: order.append(name))

    def load(settings: Any) -> Any:
        order.append("load")
        raise RuntimeError("no engine here")

    monkeypatch.setattr(runtime, "open_engine", load)
    loader = EngineLoading(settings=type("Settings", (), {"calibration_file": None, "device": device,
                                                          "engine_tuning": None})())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="no engine here"):
        loader.get()
    assert order == [*asked, "load"]


def test_the_driver_ordinal_is_the_device_torch_will_use() -> None:
    """``cuda:1`` is the driver's ordinal 1; ``cuda`` and ``auto`` torch's default, 0. Where no
    driver is (this machine) nothing is made and nothing is raised: torch says what is wrong."""
    import ctypes

    from pipeline.engine.cuda_context import device_ordinal, open_primary_context

    assert [device_ordinal(d) for d in ("cuda:1", "cuda:0", "cuda", "auto")] == [1, 0, 0, 0]
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert open_primary_context(0) is False


class FakeDriver:
    """libcuda's calls the context needs, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def cuInit(self, flags: int) -> int:  # noqa: N802 - the driver's names
        self.calls.append(("init", flags))
        return 0

    def cuDeviceGet(self, device: Any, ordinal: int) -> int:  # noqa: N802
        device._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxSetFlags(self, device: Any, flags: int) -> int:  # noqa: N802
        self.calls.append(("flags", flags))
        return 0

    def cuDevicePrimaryCtxRetain(self, context: Any, device: Any) -> int:  # noqa: N802
        self.calls.append(("retain", device.value))
        return 0


@pytest.mark.parametrize(("wait", "flags"), [(None, 0x04), ("block", 0x04), ("spin", 0x01)])
def test_the_threads_that_feed_the_gpu_sleep_while_they_wait_unless_told_to_spin(
        monkeypatch: Any, wait: str | None, flags: int) -> None:
    """The context is made with its threads' way of waiting set before it exists (the driver
    takes it only then): asleep by default, so that the cores a spinning wait would take go to
    the encodes beside the GPU; spinning when asked (TTS_JOBS_CUDA_WAIT=spin)."""
    import ctypes

    import pipeline.engine.cuda_context as cuda_context

    driver = FakeDriver()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: driver)
    assert cuda_context.open_primary_context(1, wait) is True
    assert driver.calls == [("init", 0), ("flags", flags), ("retain", 1)]


def test_a_wait_of_no_known_kind_is_refused_when_the_engine_loads(monkeypatch: Any) -> None:
    from jobs.settings import Settings
    from pipeline.engine.loading import apply_tuning
    from pipeline.errors import ModelError

    tuning = Settings.from_env({"TTS_JOBS_CUDA_WAIT": "snooze"}).engine_tuning
    assert tuning is not None and tuning.host_wait == "snooze"
    with pytest.raises(ModelError, match="unknown CUDA wait 'snooze': use block or spin"):
        apply_tuning(tuning)

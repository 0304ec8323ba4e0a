"""GPU correctness checks: tests marked ``gpu`` run only where CUDA is (the lent GPU machine:
``python -m pytest -m gpu tests/gpu``); elsewhere they are skipped and say why."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: run `python -m pytest -m gpu tests/gpu` on a GPU machine")
    for item in marked:
        item.add_marker(skip)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(autouse=True)
def engines_do_not_outlive_their_test():  # type: ignore[no-untyped-def]
    """Each test's engines given back before the next: a loaded engine is frozen out of the
    garbage collector's sight (``host_threads.spare_the_collector``: a process loads one), so an
    earlier test's engine would keep its GPU memory (the out-of-memory check measures what stays
    resident) for the rest of the session."""
    import gc

    yield
    gc.unfreeze()
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()

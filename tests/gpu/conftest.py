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

"""A process that feeds a GPU hands the interpreter over promptly to the thread queueing its work."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from pipeline.engine.host_threads import LAUNCH_SWITCH_SECONDS, hand_over_promptly


@pytest.fixture
def switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_default_interval_is_cut_to_the_launch_interval(switch_interval: None) -> None:
    sys.setswitchinterval(0.005)  # Python's default
    hand_over_promptly()
    assert sys.getswitchinterval() == pytest.approx(LAUNCH_SWITCH_SECONDS, rel=0.01)


def test_a_shorter_interval_already_set_is_kept(switch_interval: None) -> None:
    sys.setswitchinterval(LAUNCH_SWITCH_SECONDS / 3)
    hand_over_promptly()
    assert sys.getswitchinterval() == pytest.approx(LAUNCH_SWITCH_SECONDS / 3, rel=0.01)

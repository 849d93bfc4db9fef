"""The stall watch: waiting records with no batch decided for the threshold is a stall; idle never is."""

from __future__ import annotations

from coolant.streams import metrics
from coolant.streams.monitor import StallWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_waiting_records_without_progress_is_a_stall_and_progress_ends_it() -> None:
    clock = Clock()
    watch = StallWatch(after=60, clock=clock)
    clock.now += 59
    watch.waiting(10)
    assert watch.stalled_for() is None
    clock.now += 1
    watch.waiting(10)
    assert watch.stalled_for() == 60
    assert metrics.REGISTRY.get_sample_value("coolant_stalled") == 1
    watch.progressed()
    assert watch.stalled_for() is None
    assert metrics.REGISTRY.get_sample_value("coolant_stalled") == 0


def test_idle_is_not_stalled() -> None:
    clock = Clock()
    watch = StallWatch(after=60, clock=clock)
    for _ in range(10):
        clock.now += 30
        watch.waiting(0)
    assert watch.stalled_for() is None
    clock.now += 30
    watch.waiting(5)  # records just arrived: the clock starts at the last idle reading
    assert watch.stalled_for() is None

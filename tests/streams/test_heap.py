"""The worker's glibc allocator settings (coolant/streams/heap.py): taken on this platform, trimming runs and stops."""

from __future__ import annotations

import platform
import threading

import pytest

from coolant.streams import heap


def trimmers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == heap.THREAD_NAME]


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_settings_and_trims_in_a_thread_of_its_own_until_stopped() -> None:
    assert heap.tune()
    before = len(trimmers())
    stop = heap.start_trimming(every=0.01)
    assert stop is not None
    started = [t for t in trimmers() if t.is_alive()]
    assert len(started) == before + 1 and all(t.daemon for t in started)
    stop.set()
    for t in started:
        t.join(30)  # a hang guard: the thread must leave its loop once stopped
    assert len([t for t in trimmers() if t.is_alive()]) == before

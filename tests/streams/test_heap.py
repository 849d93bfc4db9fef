"""The worker's glibc allocator settings (coolant/streams/heap.py): taken on this platform, trimming runs."""

from __future__ import annotations

import platform

import pytest

from coolant.streams import heap


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_settings_and_trims_in_a_thread_of_its_own() -> None:
    assert heap.tune()
    thread = heap.start_trimming(every=0.01)
    assert thread is not None and thread.daemon and thread.is_alive()

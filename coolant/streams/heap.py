"""The C allocator under a long-running worker: glibc settings that keep its RSS near what it uses.

Python's own allocator serves objects up to 512 B; everything larger (fetched record sets, producer batches of up
to 1 MB, dict tables, JSON values) comes from glibc's `malloc`. Two of glibc's defaults make a worker's RSS
climb well above its live data:
- the mmap threshold adapts upward (to 32 MB) once a large mmapped block is freed, after which the fetch and
  produce buffers come from the heap and leave holes in it that RSS keeps;
- memory freed in the middle of the heap is returned to the system only by `malloc_trim`.
`tune()` fixes the threshold (and caps the per-thread arenas: Faust runs aiokafka in a thread of its own) before
the worker starts its threads; `start_trimming()` calls `malloc_trim` periodically from a thread of its own
(ctypes releases the GIL: the event loop never waits on it). Without glibc both do nothing.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import threading
from typing import Any

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 * 1024
"""Blocks from this size on are mmapped, and unmapped when freed (glibc's initial default, kept fixed)."""
ARENA_MAX = 2
THREAD_NAME = "coolant-malloc-trim"
TRIM_EVERY = 30.0
"""Seconds between `malloc_trim` calls (one takes well under a millisecond on a worker's heap)."""


def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018  (glibc only: musl and others have no mallopt / malloc_trim)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def tune() -> bool:
    """Set glibc's mmap threshold and arena cap; True if it took them. Call before any thread starts."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_ARENA_MAX, ARENA_MAX))


def start_trimming(every: float = TRIM_EVERY) -> threading.Event | None:
    """A daemon thread calling `malloc_trim` every `every` seconds (None where there is no glibc). Returns the
    event that stops it; it is also set at exit, so the thread is gone before the interpreter tears down."""
    libc = _libc()
    if libc is None:
        return None
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            libc.malloc_trim(0)

    thread = threading.Thread(target=loop, name=THREAD_NAME, daemon=True)
    thread.start()
    atexit.register(stop.set)
    return stop

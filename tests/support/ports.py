"""Ports for the extra services tests start (brokers, Redis, workers' web servers, fake upstreams), chosen free
at run time and reserved across processes.

A port the kernel says is free can be taken by another process before the service binds it: pytest-xdist's workers,
another engineer's run on the same host, a second checkout. So each port handed out is also claimed with a lock
file (`flock`) under the system's temp directory, held until this process exits: other test processes skip a
claimed port even while nothing is bound to it yet (a broker takes seconds to start).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import IO

LOCKS = Path(tempfile.gettempdir()) / "coolant-test-ports"
_held: dict[int, IO[bytes]] = {}
"""The lock files this process holds, by port (kept open: closing one would release its claim)."""


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    """Take the cross-process claim on `port`; False if another process holds it."""
    if port in _held:
        return False
    LOCKS.mkdir(parents=True, exist_ok=True)
    f = (LOCKS / str(port)).open("ab")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return False
    _held[port] = f
    return True


def _release(port: int) -> None:
    f = _held.pop(port, None)
    if f is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def free_ports(n: int = 1) -> int:
    """The first of `n` consecutive free ports on 127.0.0.1, claimed for this process (Kafka from
    `scripts/kafka-local` takes its listener, controller (+1) and, secured, an internal listener (+2))."""
    for _ in range(500):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        ports = range(first, first + n)
        if ports[-1] > 65535:
            continue
        claimed: list[int] = []
        for port in ports:
            if not _claim(port):
                break
            claimed.append(port)
        if len(claimed) == n and all(_bindable(p) for p in ports):
            return first
        for port in claimed:
            _release(port)
    raise RuntimeError(f"no {n} consecutive free ports on 127.0.0.1 (pid {os.getpid()})")


def free_port() -> int:
    """One free port on 127.0.0.1, claimed for this process."""
    return free_ports(1)

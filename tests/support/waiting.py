"""Waiting in tests: poll with a deadline (`wait_for`); no fixed sleep is ever an assertion."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_for(
    check: Callable[[], Awaitable[T]], what: str, timeout: float = 60.0, interval: float = 0.5,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something truthy; fail with `what` (and `on_timeout()`) after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{extra}")
        await asyncio.sleep(interval)

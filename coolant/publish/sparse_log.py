"""A log line that repeats at most once per interval: a gateway dropping thousands of records a second must not
write thousands of warnings a second, yet the count of what was held back is not lost."""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["SparseLog"]


class SparseLog:
    """At most one log line per `every` seconds; what was held back is counted in the next one."""

    def __init__(self, logger: logging.Logger, level: int, every: float) -> None:
        self.logger = logger
        self.level = level
        self.every = every
        self.last = float("-inf")
        self.suppressed = 0

    def __call__(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            self.suppressed += 1
            return
        if self.suppressed:
            msg += " (%d similar messages suppressed)"
            args = (*args, self.suppressed)
        self.last, self.suppressed = now, 0
        self.logger.log(self.level, msg, *args)

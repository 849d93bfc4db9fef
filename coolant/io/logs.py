"""Every log line one line, and without a secret (S2, docs/input-bounds.md).

Log messages quote what records carry (an error text, a deployment id): a newline in one would forge a log line
of its own, a key in one would put the key in the log store. Rather than trust every call site, the record
factory makes each record's message `shown` (redacted, control characters escaped) when it is formatted, for
coolant's own loggers and the libraries' alike. A traceback is formatted apart and kept as it is (multi-line by
nature); the worker logs those at debug level only. And `Repeats` keeps a library's retry loop from writing the
same error thousands of times while Kafka is away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from coolant.processors.redact import shown


class SafeRecord(logging.LogRecord):
    """A log record whose message is redacted and printable."""

    def getMessage(self) -> str:
        return shown(super().getMessage())


def install() -> None:
    """Make every log record of this process a `SafeRecord` (idempotent)."""
    if logging.getLogRecordFactory() is not SafeRecord:
        logging.setLogRecordFactory(SafeRecord)


REPEAT_WINDOW = 60.0
"""Seconds during which a library's repeated warning or error is counted instead of logged again."""
LIBRARY_PREFIXES = ("aiokafka", "faust", "mode")


class Repeats(logging.Filter):
    """One line per outage: a library's WARNING or ERROR logged again with the same text template (another node,
    another partition, the next retry) within `window` seconds of the first is counted, not logged; the first
    one after the window carries the count (`[and 2,186 more like it in 60 s]`).

    A broker restart made the Kafka client log about 2,200 ERRORs per worker, each retry of each connection."""

    def __init__(self, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self.clock = clock
        self._seen: dict[tuple[str, object], tuple[float, int]] = {}
        """(logger, template) -> (when its last logged line was, how many were held back since)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.msg)
        now = self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window:
            self._seen[key] = (seen[0], seen[1] + 1)
            return False
        self._seen[key] = (now, 0)
        if seen is not None and seen[1]:
            record.msg = f"{record.msg} [and {seen[1]:,} more like it in the last {now - seen[0]:.0f} s]"
        if len(self._seen) > 1024:  # templates are few; a leak here would be a bug elsewhere
            self._seen.clear()
        return True


def hold_repeats(filter_: Repeats | None = None) -> Repeats:
    """`Repeats` on every library logger (a logger's filter sees only its own records, so each gets it)."""
    repeats = filter_ or Repeats()
    names = [n for n in logging.Logger.manager.loggerDict if n.split(".")[0] in LIBRARY_PREFIXES]
    for name in {*LIBRARY_PREFIXES, *names}:
        logger = logging.getLogger(name)
        if repeats not in logger.filters:
            logger.addFilter(repeats)
    return repeats

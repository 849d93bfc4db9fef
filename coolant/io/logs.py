"""Every log line one line, and without a secret (S2, docs/input-bounds.md).

Log messages quote what records carry (an error text, a deployment id): a newline in one would forge a log line
of its own, a key in one would put the key in the log store. Rather than trust every call site, the record
factory makes each record's message `shown` (redacted, control characters escaped) when it is formatted, for
coolant's own loggers and the libraries' alike. A traceback is formatted apart and kept as it is (multi-line by
nature); the worker logs those at debug level only. And `Repeats` keeps a library's retry loop from writing the
same error thousands of times while Kafka is away: one line, then its count.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

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
REPEAT_QUIET = 10.0
"""Seconds without another repeat after which the count held back is logged: the outage is over."""
REPORT_EVERY = 2.0
"""Seconds between the checks for counts due (`start_reporting`)."""
LIBRARY_PREFIXES = ("aiokafka", "faust", "mode")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    """One (logger, template)'s lines since its last logged one."""

    logged: float
    """When its last line was logged."""
    last: float
    """When it last came up, logged or not."""
    level: int
    held: int = 0
    """How many were counted instead of logged since `logged`."""


class Repeats(logging.Filter):
    """One line per outage: a library's WARNING or ERROR logged again with the same text template (another node,
    another partition, the next retry) within `window` seconds of the first is counted, not logged. The count
    follows as one WARNING line of its own (`report`) once the template has been quiet for `quiet` seconds (the
    outage is over) or its window has passed; a line of the template after that starts over. Should one come up
    before the count was reported, it carries the count (`[and 2,186 more like it in the last 60 s]`).

    A broker restart made the Kafka client log about 2,200 ERRORs per worker, each retry of each connection.
    Libraries log from their own threads too (Faust runs the Kafka consumer in one): the counts are locked."""

    def __init__(
        self, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic, quiet: float = REPEAT_QUIET,
    ) -> None:
        super().__init__()
        self.window = window
        self.quiet = quiet
        self.clock = clock
        self._seen: dict[tuple[str, object], _Held] = {}
        """(logger, template) -> its line count since the last one logged."""
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.msg)
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen.logged < self.window:
                seen.held += 1
                seen.last = now
                return False
            if len(self._seen) > 1024:  # templates are few; a leak here would be a bug elsewhere
                self._seen.clear()
            self._seen[key] = _Held(now, now, record.levelno)
        if seen is not None and seen.held:
            record.msg = f"{record.msg} [and {seen.held:,} more like it in the last {now - seen.logged:.0f} s]"
        return True

    def due(self) -> list[tuple[str, object, int, float]]:
        """The counts due (logger, template, count, seconds since its line was logged), each once: templates quiet
        for `quiet` seconds or past their window. Templates past their window with nothing held are forgotten."""
        now = self.clock()
        out = []
        with self._lock:
            for key, seen in list(self._seen.items()):
                over = now - seen.logged >= self.window
                if seen.held and (over or now - seen.last >= self.quiet):
                    out.append((key[0], key[1], seen.held, now - seen.logged))
                    del self._seen[key]
                elif over:
                    del self._seen[key]
        return out

    def report(self) -> int:
        """Log each count due as one WARNING line; how many lines."""
        due = self.due()
        for name, template, held, span in due:
            log.warning("%s: %s more like %r in the last %.0f s (held back, one line per outage)",
                        name, f"{held:,}", template, span)
        return len(due)


def hold_repeats(filter_: Repeats | None = None) -> Repeats:
    """`Repeats` on every library logger (a logger's filter sees only its own records, so each gets it)."""
    repeats = filter_ or Repeats()
    names = [n for n in logging.Logger.manager.loggerDict if n.split(".")[0] in LIBRARY_PREFIXES]
    for name in {*LIBRARY_PREFIXES, *names}:
        logger = logging.getLogger(name)
        if repeats not in logger.filters:
            logger.addFilter(repeats)
    return repeats


def start_reporting(repeats: Repeats, every: float = REPORT_EVERY) -> threading.Event:
    """A daemon thread logging `repeats`' counts as they come due, and once more at exit (a worker stopped
    mid-outage still says how many it held back). Returns the event that stops it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            repeats.report()

    def at_exit() -> None:
        stop.set()
        repeats.quiet = 0.0
        repeats.report()

    threading.Thread(target=loop, name="coolant-log-repeats", daemon=True).start()
    atexit.register(at_exit)
    return stop

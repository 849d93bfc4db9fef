"""Every log line one line, and without a secret (S2, docs/input-bounds.md).

Log messages quote what records carry (an error text, a deployment id): a newline in one would forge a log line
of its own, a key in one would put the key in the log store. Rather than trust every call site, the record
factory makes each record's message `shown` (redacted, control characters escaped) when it is formatted, for
coolant's own loggers and the libraries' alike. A traceback is formatted apart and kept as it is (multi-line by
nature); the worker logs those at debug level only.
"""

from __future__ import annotations

import logging

from coolant.processors.redact import shown


class SafeRecord(logging.LogRecord):
    """A log record whose message is redacted and printable."""

    def getMessage(self) -> str:
        return shown(super().getMessage())


def install() -> None:
    """Make every log record of this process a `SafeRecord` (idempotent)."""
    if logging.getLogRecordFactory() is not SafeRecord:
        logging.setLogRecordFactory(SafeRecord)

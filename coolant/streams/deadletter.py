"""Invalid input as the contract's dead-letter value (§2): the record's bytes and why, never an exception."""

from __future__ import annotations

import orjson


def deadletter_value(error: str, topic: str, partition: int, offset: int, raw: bytes | None) -> bytes:
    """`{"error", "topic", "partition", "offset", "raw"}`; `raw` is the original bytes as text.

    Bytes that are not UTF-8 keep their information as backslash escapes, so nothing is lost.
    """
    text = "" if raw is None else raw.decode("utf-8", errors="backslashreplace")
    return orjson.dumps({"error": error, "topic": topic, "partition": partition, "offset": offset, "raw": text})

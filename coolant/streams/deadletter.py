"""Invalid input as the contract's dead-letter value (§2): the record's bytes and why, never an exception.

The value is bounded (B7, docs/input-bounds.md) whatever the input: at most RAW_KEEP bytes of the record are
kept, so even a record of escapes that triple in JSON stays far below Kafka's message size limit. Secrets in
the record and in the error are redacted (S2). An operator who opted in to keeping raw records
(`--keep-raw-deadletters`) gets the record unredacted, labelled `raw_unredacted: true` in every such dead letter;
the error, which people read in logs and tools, is redacted even then.
"""

from __future__ import annotations

import base64

import orjson

from coolant.processors.redact import redact, redact_bytes

RAW_KEEP = 16_384
"""B7: bytes of the raw record kept in a dead letter (JSON escaping at most sextuples them: < 100 KiB)."""
ERROR_KEEP = 2_048
"""B7: characters of the error text kept (a decoder message can quote the record)."""
REDACT_MARGIN = 8_192
"""Bytes redacted beyond what is kept: a secret cut by the RAW_KEEP cut is still recognised whole (a PEM block is
the longest, at about 3 KB). Only this much of a record is scanned, so a 1 MB record costs no more than a small one."""


def deadletter_value(
    error: str, topic: str, partition: int, offset: int, raw: bytes | None, *, keep_raw: bool = False
) -> bytes:
    """`{"error", "topic", "partition", "offset", "raw", "raw_size"}`, plus `raw_truncated: true` when cut and
    `raw_encoding: "base64"` when the kept bytes are not UTF-8 (the text form would triple their size)."""
    data = b"" if raw is None else bytes(raw)
    head = data[: RAW_KEEP + REDACT_MARGIN]
    full = head if keep_raw else redact_bytes(head)
    kept = full[:RAW_KEEP]
    truncated = len(data) > RAW_KEEP if keep_raw else len(full) > RAW_KEEP or len(data) > len(head)
    value: dict[str, object] = {
        "error": redact(error[: ERROR_KEEP + REDACT_MARGIN])[:ERROR_KEEP],
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "raw": "",
        "raw_size": len(data),
    }
    if raw is None:
        value["tombstone"] = True
    try:
        value["raw"] = kept.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(kept) - 3 and exc.end == len(kept):  # the cut split a character
            value["raw"] = kept[: exc.start].decode("utf-8")
        else:
            value["raw"] = base64.b64encode(kept).decode("ascii")
            value["raw_encoding"] = "base64"
    if truncated:
        value["raw_truncated"] = True
    if keep_raw:
        value["raw_unredacted"] = True
    return orjson.dumps(value)

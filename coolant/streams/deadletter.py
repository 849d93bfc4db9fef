"""Invalid input as the contract's dead-letter value (§2): the record's bytes and why, never an exception; and
`DeadLetters`, the shell's one way to send one.

The value is bounded (B7, docs/input-bounds.md) whatever the input: at most RAW_KEEP bytes of the record are
kept, so even a record of escapes that triple in JSON stays far below Kafka's message size limit. Secrets in
the record and in the error are redacted (S2). An operator who opted in to keeping raw records
(`--keep-raw-deadletters`) gets the record unredacted, labelled `raw_unredacted: true` in every such dead letter;
the error, which people read in logs and tools, is redacted even then.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar, cast

import orjson

from coolant.processors import Disposition
from coolant.processors.redact import redact, redact_bytes
from coolant.schemas import InvalidRecord, Record, decode
from coolant.streams import metrics

log = logging.getLogger(__name__)
R = TypeVar("R", bound=Record)

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


class DeadLetters:
    """Where the shell sends what it cannot decide (B7, B8, S2): invalid records, and records a stage failed on.

    Each dead letter is logged (redacted, `topic[partition]@offset`), counted by topic and disposition, and sent
    to the dead-letter topic; the stage that found it goes on with the next record.
    """

    def __init__(self, topic: Any, *, keep_raw: bool = False) -> None:
        self.topic = topic
        """The dead-letter topic (a Faust topic: `send(key=, value=)`)."""
        self.keep_raw = keep_raw

    async def send(self, message: Any, error: str, disposition: Disposition = Disposition.INVALID) -> None:
        """B7/S2: a bounded, redacted dead letter (raw kept only on opt-in); the log line is always redacted."""
        log.warning(
            "dead letter %s[%s]@%s: %s", message.topic, message.partition, message.offset, redact(error)[:ERROR_KEEP]
        )
        metrics.DEADLETTERS.labels(message.topic).inc()
        metrics.RECORDS.labels(message.topic, disposition).inc()
        value = deadletter_value(
            error, message.topic, message.partition, message.offset, message.value, keep_raw=self.keep_raw,
        )
        await self.topic.send(key=message.key, value=value)

    async def failed(self, message: Any, exc: Exception, stage: str) -> None:
        """B8: one record broke a stage (a bug); it is dead-lettered with the reason and the stage goes on."""
        problem = redact(f"{type(exc).__name__}: {exc}")[:ERROR_KEEP]  # S2: the text may quote the record
        log.error("%s failed on %s[%s]@%s: %s", stage, message.topic, message.partition, message.offset, problem)
        log.debug("%s failure", stage, exc_info=exc)  # the traceback, unredacted, only at debug level
        await self.send(message, f"processing failed in {stage}: {type(exc).__name__}: {exc}", Disposition.FAILED)

    async def decoded(self, message: Any, expected: type[R], *, dead_letter: bool = True) -> R | None:
        """The message's record if it is valid and of the `expected` type; else None, dead-lettered with the
        reason (unless `dead_letter` is False: another stage reports it)."""
        try:
            rec = decode(message.value)
        except InvalidRecord as exc:
            if dead_letter:
                await self.send(message, str(exc))
            return None
        if type(rec) is not expected:
            if dead_letter:
                await self.send(message, f"schema: expected {expected.schema} on {message.topic}, got {rec.schema}")
            return None
        return cast(R, rec)

    async def records(
        self, stream: Any, expected: type[R], *, dead_letter: bool = True,
    ) -> AsyncIterator[tuple[Any, R]]:
        """An agent's stream as (message, record) pairs of the `expected` type; the others skipped (and
        dead-lettered, unless `dead_letter` is False: another agent of the same topic reports them)."""
        async for event in stream.events():
            rec = await self.decoded(event.message, expected, dead_letter=dead_letter)
            if rec is not None:
                yield event.message, rec

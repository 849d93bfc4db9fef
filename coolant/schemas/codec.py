"""Bytes <-> records: the single entry point for every reader (replay, agents, publisher, CLI).

msgspec decodes and validates in one C pass against the record classes themselves, so the
record definitions are the only statement of the schema (and are what JSON Schema is made from).
"""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec

from coolant.schemas.cooldown import Cooldown
from coolant.schemas.deployment import DeploymentRecord
from coolant.schemas.errors import InvalidRecord
from coolant.schemas.health import Health
from coolant.schemas.outcome import Outcome
from coolant.schemas.transition import HealthTransition

InputRecord = Outcome | Health | DeploymentRecord
Record = Outcome | Health | DeploymentRecord | Cooldown | HealthTransition

_decoder = msgspec.json.Decoder(Record)
_encoder = msgspec.json.Encoder()
_AT = re.compile(r" - at `\$\.([^`\[]+)")
_MISSING = re.compile(r"missing required field `([^`]+)`")


def _invalid(exc: msgspec.MsgspecError) -> InvalidRecord:
    text = str(exc)
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return InvalidRecord(f"not valid JSON: {text}")
    if ("Invalid value" in text and "`$.schema`" in text) or "missing required field `schema`" in text:
        return InvalidRecord(f"unknown or missing schema: {text}", "schema")
    m = _AT.search(text) or _MISSING.search(text)
    return InvalidRecord(text, m.group(1) if m else None)


def decode(raw: bytes | bytearray | memoryview | str) -> Record:
    """Decode and validate one JSON record; InvalidRecord says which field is wrong and how."""
    try:
        return _decoder.decode(raw)
    except msgspec.MsgspecError as exc:
        raise _invalid(exc) from None


def decode_block(block: bytes) -> list[Record]:
    """Decode newline-delimited records in one call (blank lines skipped); InvalidRecord if any is bad."""
    try:
        return _decoder.decode_lines(block)
    except msgspec.MsgspecError as exc:
        raise _invalid(exc) from None


def from_dict(d: Any) -> Record:
    """Validate an already decoded object (YAML fixtures, tests) by the same rules."""
    try:
        return cast(Record, msgspec.convert(d, Record))
    except msgspec.MsgspecError as exc:
        raise _invalid(exc) from None


def encode(record: Record) -> bytes:
    """Compact JSON, the wire and file format (with its `schema` tag)."""
    return _encoder.encode(record)


def to_dict(record: Record) -> dict[str, Any]:
    return msgspec.to_builtins(record)  # type: ignore[no-any-return]

"""Bytes <-> records: the single entry point for every reader (replay, agents, publisher, CLI).

msgspec decodes and validates in one C pass against the record classes themselves, so the
record definitions are the only statement of the schema (and are what JSON Schema is made from).

Before that pass, B1 (docs/input-bounds.md) bounds what a decoder recursing into the record could meet: a
missing value (a tombstone), more than MAX_RECORD_BYTES, or nesting deeper than MAX_DEPTH even in an unknown
field. Where the fast pass refuses what the JSON Schema accepts (an integral float such as `500.0` or `5e2`
for an int, a lone surrogate escape), B5 decides again from the standard JSON reader, so that the schema and
the worker agree.
"""

from __future__ import annotations

import json
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

MAX_RECORD_BYTES = 1 << 20
"""B1: Kafka's default `message.max.bytes`; records are a few hundred bytes."""
MAX_DEPTH = 32
"""B1: the records nest two levels; unknown fields get room to grow, not a recursion bomb."""
_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SURROGATE = re.compile("[\ud800-\udfff]")
_TS_HINT = (
    " (ts is epoch seconds, below 1e10; a value near 1.7e12 is milliseconds, near 1.7e15 microseconds:"
    " divide by 1000 or 1e6)"
)


def _too_deep(raw: bytes) -> bool:
    """B1 nesting, cheaply: only a record with more than MAX_DEPTH brackets at all is scanned (strings skipped)."""
    if raw.find(b"[") < 0 and raw.find(b"{", raw.find(b"{") + 1) < 0:
        return False  # the usual record: one object, no array (memchr scans; `count` is a slower byte loop)
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _NESTING.finditer(raw):
        c = m.group()
        if c in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in (b"]", b"}"):
            depth -= 1
    return False


def _bounded(raw: bytes | bytearray | memoryview | str | None) -> bytes | str:
    """B1: the value itself, or InvalidRecord for a tombstone, an oversize record or a recursion bomb."""
    if raw is None:
        raise InvalidRecord("no value (a tombstone): a record is a JSON object")
    if type(raw) is not bytes and not isinstance(raw, str):
        raw = bytes(raw)
    size = len(raw)
    if size > MAX_RECORD_BYTES:
        raise InvalidRecord(f"record of {size} bytes, above the {MAX_RECORD_BYTES} byte limit")
    if _too_deep(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw):
        raise InvalidRecord(f"nested deeper than {MAX_DEPTH} levels")
    return raw


def _normalized(value: Any) -> Any:
    """B5: integral floats as ints (JSON Schema's "integer" is a number with no fraction) and lone surrogates
    as U+FFFD, throughout (float fields take the ints back unchanged)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, dict):
        return {_normalized(k): _normalized(v) for k, v in value.items()}
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _second_chance(raw: bytes | str) -> Record | None:
    """B5: the record as the standard JSON reader (which JSON Schema validators use) sees it, normalized; None
    when that reader refuses it too, or when the normalized record is still invalid."""
    try:
        obj = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    try:
        return cast(Record, msgspec.convert(_normalized(obj), Record))
    except msgspec.MsgspecError:
        return None


def _invalid(exc: msgspec.MsgspecError) -> InvalidRecord:
    text = str(exc)
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return InvalidRecord(f"not valid JSON: {text}")
    if ("Invalid value" in text and "`$.schema`" in text) or "missing required field `schema`" in text:
        return InvalidRecord(f"unknown or missing schema: {text}", "schema")
    m = _AT.search(text) or _MISSING.search(text)
    field = m.group(1) if m else None
    if field == "ts" and ("<" in text or "out of range" in text):
        text += _TS_HINT  # B2: the usual cause is a unit
    return InvalidRecord(text, field)


def decode(raw: bytes | bytearray | memoryview | str | None) -> Record:
    """Decode and validate one JSON record; InvalidRecord says which field is wrong and how (never another
    exception, whatever the bytes)."""
    if not (type(raw) is bytes and len(raw) <= MAX_RECORD_BYTES and raw.find(b"[") < 0 and raw.find(b"{", 1) < 0):
        raw = _bounded(raw)  # the usual record (one flat object) needs no closer look: two memchr scans
    try:
        return _decoder.decode(raw)
    except msgspec.MsgspecError as exc:
        rec = _second_chance(raw)
        if rec is None:
            raise _invalid(exc) from None
        return rec


def decode_block(block: bytes) -> list[Record]:
    """Decode newline-delimited records in one call (blank lines skipped); InvalidRecord if any is bad (the
    caller redoes the block line by line with `decode` to say which, and to give B5 its second chance)."""
    try:
        records = _decoder.decode_lines(block)
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise InvalidRecord(str(exc)) from None
    # B1 as `decode` applies it (msgspec skips an unknown field nested 33-999 deep without complaint). Every
    # decoded line holds at least one `{`, so a line nested deeper than MAX_DEPTH brings the block's brackets
    # to at least len(records) + MAX_DEPTH; below that no line needs the per-line scan.
    opens = block.count(b"[") + block.count(b"{")
    if opens >= len(records) + MAX_DEPTH and any(map(_too_deep, block.split(b"\n"))):
        raise InvalidRecord(f"a line is nested deeper than {MAX_DEPTH} levels")
    return records


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

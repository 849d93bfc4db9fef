"""Bytes <-> records: the single entry point for every reader (replay, agents, publisher, CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from coolant.schemas.cooldown import COOLDOWN_SCHEMA, Cooldown
from coolant.schemas.deployment import DEPLOYMENT_SCHEMA, DeploymentRecord
from coolant.schemas.errors import InvalidRecord
from coolant.schemas.health import HEALTH_SCHEMA, Health
from coolant.schemas.outcome import OUTCOME_SCHEMA, Outcome

InputRecord = Outcome | Health | DeploymentRecord
Record = InputRecord | Cooldown

_BY_SCHEMA: dict[str, Any] = {
    OUTCOME_SCHEMA: Outcome.from_dict,
    HEALTH_SCHEMA: Health.from_dict,
    DEPLOYMENT_SCHEMA: DeploymentRecord.from_dict,
    COOLDOWN_SCHEMA: Cooldown.from_dict,
}


def decode_json(raw: bytes | bytearray | memoryview | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRecord(f"not valid JSON: {exc}") from None


def from_dict(d: Any) -> Record:
    """Dispatch on `schema`; anything not an object with a known schema is invalid."""
    if type(d) is not dict:
        raise InvalidRecord(f"a record must be a JSON object, got {type(d).__name__}")
    schema = d.get("schema")
    build = _BY_SCHEMA.get(schema) if type(schema) is str else None
    if build is None:
        raise InvalidRecord(f"unknown schema {schema!r}", "schema")
    return build(d)  # type: ignore[no-any-return]


def parse(raw: bytes | bytearray | memoryview | str | Mapping[str, Any]) -> Record:
    """Decode and validate one record from JSON bytes/str or an already decoded dict."""
    return from_dict(raw if isinstance(raw, Mapping) else decode_json(raw))


def to_json(record: Record) -> bytes:
    """Compact JSON, the wire and file format."""
    return orjson.dumps(record.to_dict())

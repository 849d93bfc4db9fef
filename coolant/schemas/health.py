"""`coolant.health/1`: one record per health probe of a deployment (contract §1.2)."""

from __future__ import annotations

import msgspec

from coolant.schemas.types import EventId, Latency, Name, StatusCode, Timestamp

HEALTH_SCHEMA = "coolant.health/1"


class Health(msgspec.Struct, frozen=True, tag_field="schema", tag=HEALTH_SCHEMA):
    event_id: EventId
    ts: Timestamp
    deployment_id: Name
    model_group: Name
    healthy: bool
    status_code: StatusCode | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    latency_ms: Latency | None = None
    prober: str | None = None
    mode: str | None = None

    schema = HEALTH_SCHEMA

"""`coolant.health/1`: one record per health probe of a deployment (contract §1.2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coolant.schemas.fields import opt_float, opt_int, opt_str, req_bool, req_event_id, req_float, req_str

HEALTH_SCHEMA = "coolant.health/1"


@dataclass(frozen=True, slots=True)
class Health:
    event_id: str
    ts: float
    deployment_id: str
    model_group: str
    healthy: bool
    status_code: int | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    latency_ms: float | None = None
    prober: str | None = None
    mode: str | None = None

    schema = HEALTH_SCHEMA

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Health:
        return cls(
            req_event_id(d),
            req_float(d, "ts"),
            req_str(d, "deployment_id"),
            req_str(d, "model_group"),
            req_bool(d, "healthy"),
            opt_int(d, "status_code"),
            opt_str(d, "exception_type"),
            opt_str(d, "exception_message"),
            opt_float(d, "latency_ms"),
            opt_str(d, "prober"),
            opt_str(d, "mode"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": HEALTH_SCHEMA,
            "event_id": self.event_id,
            "ts": self.ts,
            "deployment_id": self.deployment_id,
            "model_group": self.model_group,
            "healthy": self.healthy,
            "status_code": self.status_code,
            "exception_type": self.exception_type,
            "exception_message": self.exception_message,
            "latency_ms": self.latency_ms,
            "prober": self.prober,
            "mode": self.mode,
        }

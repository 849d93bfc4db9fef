"""`coolant.outcome/1`: one record per attempt a gateway makes against a deployment (contract §1.1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coolant.schemas.errors import InvalidRecord
from coolant.schemas.fields import (
    opt_bool,
    opt_float,
    opt_int,
    opt_str,
    req_bool,
    req_event_id,
    req_float,
    req_str,
)

OUTCOME_SCHEMA = "coolant.outcome/1"


@dataclass(frozen=True, slots=True)
class Outcome:
    event_id: str
    ts: float
    deployment_id: str
    model_group: str
    ok: bool
    status_code: int | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    retry_after: str | None = None
    cooldown_time: float | None = None
    attempt: int = 0
    final: bool = True
    source: str = "request"
    gateway: str | None = None
    latency_ms: float | None = None

    schema = OUTCOME_SCHEMA

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Outcome:
        """Validate a decoded JSON object; unknown fields are ignored (forward compatibility)."""
        attempt = opt_int(d, "attempt")
        if attempt is not None and attempt < 0:
            raise InvalidRecord(f"must be >= 0, got {attempt}", "attempt")
        return cls(
            req_event_id(d),
            req_float(d, "ts"),
            req_str(d, "deployment_id"),
            req_str(d, "model_group"),
            req_bool(d, "ok"),
            opt_int(d, "status_code"),
            opt_str(d, "exception_type"),
            opt_str(d, "exception_message"),
            opt_str(d, "retry_after"),
            opt_float(d, "cooldown_time"),
            attempt or 0,
            opt_bool(d, "final", True),
            opt_str(d, "source") or "request",
            opt_str(d, "gateway"),
            opt_float(d, "latency_ms"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": OUTCOME_SCHEMA,
            "event_id": self.event_id,
            "ts": self.ts,
            "deployment_id": self.deployment_id,
            "model_group": self.model_group,
            "ok": self.ok,
            "status_code": self.status_code,
            "exception_type": self.exception_type,
            "exception_message": self.exception_message,
            "retry_after": self.retry_after,
            "cooldown_time": self.cooldown_time,
            "attempt": self.attempt,
            "final": self.final,
            "source": self.source,
            "gateway": self.gateway,
            "latency_ms": self.latency_ms,
        }

"""`coolant.cooldown/1`: the output record, the alert feed and the materializer's input (§1.4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coolant.schemas.errors import InvalidRecord
from coolant.schemas.fields import opt_int, opt_str, req_event_id, req_float, req_str

COOLDOWN_SCHEMA = "coolant.cooldown/1"
REASONS = frozenset(
    {"rate_limited", "failure_rate", "total_outage", "non_retryable", "allowed_fails", "health_check", "manual"}
)


@dataclass(frozen=True, slots=True)
class Window:
    """The counts the decision saw."""

    start: float
    successes: int
    failures: int


@dataclass(frozen=True, slots=True)
class Cooldown:
    event_id: str
    deployment_id: str
    model_group: str
    ts: float
    until: float
    cooldown_time: float
    reason: str
    status_code: int | None
    exception_type: str | None
    exception_received: str
    trigger_event_id: str
    window: Window

    schema = COOLDOWN_SCHEMA

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cooldown:
        reason = req_str(d, "reason")
        if reason not in REASONS:
            raise InvalidRecord(f"unknown reason {reason!r}", "reason")
        w = d.get("window")
        if type(w) is not dict:
            raise InvalidRecord("must be an object", "window")
        return cls(
            req_event_id(d),
            req_str(d, "deployment_id"),
            req_str(d, "model_group"),
            req_float(d, "ts"),
            req_float(d, "until"),
            req_float(d, "cooldown_time"),
            reason,
            opt_int(d, "status_code"),
            opt_str(d, "exception_type"),
            opt_str(d, "exception_received") or "",
            req_str(d, "trigger_event_id"),
            Window(req_float(w, "start"), int(req_float(w, "successes")), int(req_float(w, "failures"))),
        )

    def to_dict(self) -> dict[str, Any]:
        ct = self.cooldown_time
        return {
            "schema": COOLDOWN_SCHEMA,
            "event_id": self.event_id,
            "deployment_id": self.deployment_id,
            "model_group": self.model_group,
            "ts": self.ts,
            "until": self.until,
            # E3: a whole-number duration is a JSON integer, as LiteLLM writes it.
            "cooldown_time": int(ct) if ct == int(ct) else ct,
            "reason": self.reason,
            "status_code": self.status_code,
            "exception_type": self.exception_type,
            "exception_received": self.exception_received,
            "trigger_event_id": self.trigger_event_id,
            "window": {
                "start": self.window.start,
                "successes": self.window.successes,
                "failures": self.window.failures,
            },
        }

"""`coolant.cooldown/1`: the output record, the alert feed and the materializer's input (§1.4)."""

from __future__ import annotations

from typing import Literal

import msgspec

from coolant.schemas.types import EventId, Name

COOLDOWN_SCHEMA = "coolant.cooldown/1"
Reason = Literal[
    "rate_limited",
    "failure_rate",
    "total_outage",
    "non_retryable",
    "allowed_fails",
    "health_check",
    "manual",
    "quota_exhausted",
    "probation",
    "consecutive_failures",
    "recent_failure_rate",
]
"""`quota_exhausted` (X6) and `probation` (X7) come only from the opt-in extensions, `consecutive_failures` (X10)
and `recent_failure_rate` (X11) only from the outlier profile (docs/outlier.md)."""


def whole_as_int(x: int | float) -> int | float:
    """E3: a cooldown's number as LiteLLM writes it, an int when whole (5, not 5.0): its "Try again in N
    seconds" text reads it. The one spelling of the rule, for the record, LiteLLM's value and the admin API."""
    return int(x) if isinstance(x, float) and x.is_integer() else x


class Window(msgspec.Struct, frozen=True):
    """The counts the decision saw."""

    start: float
    successes: int
    failures: int


class Cooldown(msgspec.Struct, frozen=True, tag_field="schema", tag=COOLDOWN_SCHEMA):
    """`cooldown_time` is an int when whole (E3: written as 5, not 5.0, as LiteLLM writes it)."""

    event_id: EventId
    deployment_id: Name
    model_group: Name
    ts: float
    until: float
    cooldown_time: int | float
    reason: Reason
    status_code: int | None
    exception_type: str | None
    exception_received: str
    trigger_event_id: str
    window: Window

    schema = COOLDOWN_SCHEMA

"""`coolant.outcome/1`: one record per attempt a gateway makes against a deployment (contract §1.1)."""

from __future__ import annotations

import msgspec

from coolant.schemas.types import (
    Duration,
    EventId,
    Latency,
    Name,
    NonNegativeInt,
    RecordDuration,
    StatusCode,
    Timestamp,
)

OUTCOME_SCHEMA = "coolant.outcome/1"


class RateLimit(msgspec.Struct, frozen=True, omit_defaults=True):
    """A provider's announced budget: what remains, and seconds after the record's `ts` until it refills."""

    remaining_requests: NonNegativeInt | None = None
    remaining_tokens: NonNegativeInt | None = None
    reset_requests: Duration | None = None
    reset_tokens: Duration | None = None


class Outcome(msgspec.Struct, frozen=True, tag_field="schema", tag=OUTCOME_SCHEMA):
    """Optional fields given as null mean "absent"; `final`/`attempt`/`source` defaults live in the properties."""

    event_id: EventId
    ts: Timestamp
    deployment_id: Name
    model_group: Name
    ok: bool
    status_code: StatusCode | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    retry_after: str | None = None
    cooldown_time: RecordDuration | None = None
    attempt: NonNegativeInt | None = None
    final: bool | None = None
    source: str | None = None
    gateway: str | None = None
    latency_ms: Latency | None = None
    ratelimit: RateLimit | None = None
    """The quota a successful response announced (X6); null when it announced none."""
    origin: str | None = None
    """Who ended a failed attempt: "caller" (the client went away) or "upstream" (anything the deployment did,
    a stream that died mid-answer included); null when the publisher cannot tell. Only the outlier profile
    reads it: a caller's disconnect is not the deployment's failure."""

    schema = OUTCOME_SCHEMA

    @property
    def is_final(self) -> bool:
        return self.final is not False

    @property
    def pre_call_check(self) -> bool:
        """N2: any source other than "pre_call_check" is a request."""
        return self.source == "pre_call_check"




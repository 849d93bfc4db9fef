"""`coolant.health_transition/1`: a deployment's health flipped (healthy <-> unhealthy), with the probe as evidence.

Published only on change, as LiteLLM writes its health row only on change: the alert feed for health,
not a copy of every probe. The first probe ever seen for a deployment is a change (from unknown).
"""

from __future__ import annotations

import msgspec

from coolant.schemas.types import EventId, Name

TRANSITION_SCHEMA = "coolant.health_transition/1"


class HealthTransition(msgspec.Struct, frozen=True, tag_field="schema", tag=TRANSITION_SCHEMA):
    """`event_id` is derived from the probe's, so a re-processed probe yields the same transition id.

    `exception_received` is masked like a cooldown's (§1.4); `previous` is null for a first probe.
    """

    event_id: EventId
    deployment_id: Name
    model_group: Name
    ts: float
    healthy: bool
    previous: bool | None
    status_code: int | None
    exception_type: str | None
    exception_received: str
    prober: str | None
    probe_event_id: str

    schema = TRANSITION_SCHEMA

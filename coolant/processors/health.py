"""Health transitions: when a probe flips a deployment's health (the health alert feed, not a copy of every probe).

Pure, like the rest of the core: `step_health` asks `transition` whether the new probe changed the verdict in
force and returns the answer in its `Step`, so the live shell and `coolant replay` publish the same records. The
rule follows H1, so a transition is exactly a change
of the materialized `is_healthy`: a probe older than the state in force changes nothing (H1 keeps the greatest
`ts`; on a tie the later one wins), and the first probe ever seen is a change from unknown.
"""

from __future__ import annotations

import hashlib

from coolant.processors.categories import exception_name
from coolant.processors.emit import mask
from coolant.processors.state import HealthState
from coolant.schemas import HEALTH_SCHEMA, TRANSITION_SCHEMA, Health, HealthTransition


def transition_id(deployment_id: str, probe_event_id: str) -> str:
    """Deterministic from the probe (as `cooldown_id` is from its trigger), so a re-decided probe repeats the id."""
    digest = hashlib.sha256(f"{TRANSITION_SCHEMA}\n{HEALTH_SCHEMA}\n{deployment_id}\n{probe_event_id}".encode())
    return "ht-" + digest.hexdigest()[:32]


def transition(previous: HealthState | None, rec: Health, model_group: str | None = None) -> HealthTransition | None:
    """The transition `rec` causes on top of `previous` (the state before it), or None when health did not flip.

    `model_group` is the registry's group when the deployment is known (R3); the probe's otherwise.
    """
    if previous is not None and (rec.ts < previous.timestamp or rec.healthy == previous.is_healthy):
        return None
    name = exception_name(rec.exception_type)
    message = rec.exception_message if rec.exception_message is not None else name
    return HealthTransition(
        event_id=transition_id(rec.deployment_id, rec.event_id),
        deployment_id=rec.deployment_id,
        model_group=model_group if model_group is not None else rec.model_group,
        ts=rec.ts,
        healthy=rec.healthy,
        previous=None if previous is None else previous.is_healthy,
        status_code=rec.status_code,
        exception_type=mask(name),
        exception_received=mask(message) or "",
        prober=rec.prober,
        probe_event_id=rec.event_id,
    )

"""What each record and each clock tick announces: the alerting policy, pure over plain data.

`on_record` and `on_tick` take the state and the wall-clock `now` and return the next state plus the
notices, sent or held back by flap suppression, so the loop in `alerter` only does I/O. Suppression is
judged by processing time (what the channel sees), recoveries by their `until`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from coolant.alerts import recovery, suppress
from coolant.alerts.slack import Payload, cooldown_payload, recovery_payload, transition_payload
from coolant.schemas import Cooldown, HealthTransition, Record

Kind = Literal["cooldown", "recovery", "unhealthy", "healthy"]


@dataclass(frozen=True, slots=True)
class AlertState:
    suppression: suppress.State = field(default_factory=dict)
    recoveries: recovery.Schedule = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice:
    kind: Kind
    deployment_id: str
    payload: Payload | None
    """None when flap suppression held it back."""


def on_record(state: AlertState, rec: Record, now: float, period: float) -> tuple[AlertState, list[Notice]]:
    """A cooldown alerts and schedules its recovery; a health flip alerts; other records say nothing.

    A first probe that finds a deployment healthy is no news (nothing was wrong), so it is not announced.
    """
    if isinstance(rec, Cooldown):
        sup, verdict = suppress.decide(state.suppression, rec.deployment_id, "cooldown", False, now, period)
        payload = cooldown_payload(rec, verdict.suppressed) if verdict.send else None
        return AlertState(sup, recovery.add(state.recoveries, rec)), [Notice("cooldown", rec.deployment_id, payload)]
    if isinstance(rec, HealthTransition):
        if rec.previous == rec.healthy or (rec.previous is None and rec.healthy):
            return state, []
        sup, verdict = suppress.decide(state.suppression, rec.deployment_id, "health", rec.healthy, now, period)
        payload = transition_payload(rec, verdict.suppressed) if verdict.send else None
        kind: Kind = "healthy" if rec.healthy else "unhealthy"
        return AlertState(sup, state.recoveries), [Notice(kind, rec.deployment_id, payload)]
    return state, []


def on_tick(state: AlertState, now: float, period: float) -> tuple[AlertState, list[Notice]]:
    """Recovery notices whose cooldown is over by `now`; forgets suppression entries that no longer matter."""
    rest, ready = recovery.due(state.recoveries, now)
    sup = suppress.prune(state.suppression, now, period)
    out: list[Notice] = []
    for p in ready:
        sup, verdict = suppress.decide(sup, p.deployment_id, "cooldown", True, now, period)
        payload = recovery_payload(p, verdict.suppressed) if verdict.send else None
        out.append(Notice("recovery", p.deployment_id, payload))
    return AlertState(sup, rest), out

"""When to announce that a deployment's cooldown is over: pure scheduling over plain data.

A deployment cooled again before its cooldown ended (an extension, or an overlapping cooldown of another
reason) keeps one pending recovery, due at the latest `until` seen. Nothing here survives a restart: a
cooldown consumed before the restart never gets its recovery notice (its offset is committed, so it is not
read again). `until` is the record's wall-clock end, so "due" is judged by wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coolant.schemas import Cooldown


@dataclass(frozen=True, slots=True)
class Pending:
    deployment_id: str
    model_group: str
    since: float
    """Start of the first cooldown of this episode."""
    until: float
    """The latest end seen: the recovery is due then."""
    reason: str
    """Reason of the cooldown that ends last."""
    cooldowns: int
    """Cooldowns in this episode (1 + extensions)."""


Schedule = Mapping[str, Pending]


def add(schedule: Schedule, cd: Cooldown) -> dict[str, Pending]:
    """Schedule (or push back) the recovery of `cd`'s deployment; an earlier `until` never shortens it."""
    out = dict(schedule)
    old = schedule.get(cd.deployment_id)
    if old is None:
        out[cd.deployment_id] = Pending(cd.deployment_id, cd.model_group, cd.ts, cd.until, cd.reason, 1)
    else:
        later = cd.until > old.until
        out[cd.deployment_id] = Pending(
            cd.deployment_id,
            cd.model_group if later else old.model_group,
            min(old.since, cd.ts),
            max(old.until, cd.until),
            cd.reason if later else old.reason,
            old.cooldowns + 1,
        )
    return out


def due(schedule: Schedule, now: float) -> tuple[dict[str, Pending], list[Pending]]:
    """Split off the recoveries whose time has come (`until <= now`), earliest first."""
    ready = sorted((p for p in schedule.values() if p.until <= now), key=lambda p: (p.until, p.deployment_id))
    rest = {k: p for k, p in schedule.items() if p.until > now}
    return rest, ready


def next_due(schedule: Schedule) -> float | None:
    """When the next recovery is due (epoch seconds), None when nothing is pending."""
    return min((p.until for p in schedule.values()), default=None)

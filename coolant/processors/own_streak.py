"""PF8: a lone primary's streak of failures, decided in the pod on the records it published itself.

X10 counts a deployment's failures in a row fleet-wide, in its partition's order. For a group's only deployment
with fallbacks (X12, k = `consecutive_single`) the streak is usually one request's attempts in one router: the
request and its retries, made back to back. Decided by the worker, the cooldown travels publish, Kafka, worker,
Redis, push, and reaches that router after the retries it was meant to spare. The pod holds the same evidence:
its own records, in the order it published them. When it is the deployment's only publisher that order is the
partition's, so its streak is the worker's and its cooldown is the one the worker emits for the same record.
With other publishers their answers may break the fleet's streak (or their failures lengthen it), so the pod's
streak is its own evidence, as a LiteLLM process's own counters are: the pod applies it to its own routers only,
never to Redis, the push or the topic, where only the worker's decisions go. Its copy ends after one step; any
cooldown the worker decides reaches it through the push and supersedes it (never shorter: the later end wins;
a release drops a copy that started at or before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coolant.processors import outlier
from coolant.processors.categories import exception_name
from coolant.processors.decide import Candidate, Failure
from coolant.processors.duration import request_duration
from coolant.processors.engine import counted, emit_fresh
from coolant.processors.policy import Policy
from coolant.processors.prefetch import fleet_dependent, provisional
from coolant.processors.state import NEG_INF
from coolant.schemas import Cooldown, Outcome, Window


@dataclass(slots=True)
class Streak:
    """One (gateway, deployment)'s X10 state over the pod's own records, and its newest ts (for L1)."""

    in_row: int = 0
    """Failures since the last answer that ended the streak (X10.1, X10.2, X10.4, X10.5)."""
    since: float = NEG_INF
    """The ts of the first of them."""
    began: float = NEG_INF
    """When the first of them began (X10.5, `outlier.began`)."""
    fired: bool = False
    """The pod cooled on this streak: it decides nothing more until an answer ends the worker's streak too."""
    latest: float = NEG_INF
    """The newest ts of the streak's failures: with `latest_began`, an answer no older, whose attempt began no
    earlier, ends the worker's streak, whatever it holds."""
    latest_began: float = NEG_INF
    """The latest start of the streak's failures' attempts."""
    hw: float = NEG_INF


@dataclass(slots=True)
class OwnStreaks:
    """PF8's state: one `Streak` per (gateway, deployment) the rule applies to (bounded by the registry)."""

    streaks: dict[tuple[str, str], Streak] = field(default_factory=dict)


def own_streak(policy: Policy, own: OwnStreaks, rec: Outcome) -> Cooldown | None:
    """PF8: the cooldown the pod's own streak decides for `rec`, or None. Every record the pod publishes goes
    through here, in publish order. Only under the outlier profile, for a group's only deployment with fallbacks,
    at the streak's first failure with `in_row` >= k (k = `consecutive_single`) that passes the gate: with one
    publisher the worker's streak is then the pod's, record for record, so X10 fires on the same record (or a
    compatible rule cooled it first). Once the pod fired, the worker's `in_row` may differ from the pod's (a
    compatible cooldown instead of X10 does not reset it; X10.3's reset moves X10.4's `since` and X10.5's start),
    so the pod waits for an answer no older than any failure of the streak whose attempt began no earlier than
    any of theirs, which ends the worker's streak too. Later cooldowns of a longer streak, X13's re-cool and
    RC3's holds read the fleet's state: the worker's, pushed."""
    o = policy.options
    out = o.outlier
    if out is None or fleet_dependent(policy):
        return None
    entry = policy.registry.get(rec.deployment_id)
    if entry is None or not policy.single(entry.model_group) or policy.lone(entry.model_group):
        return None
    ts = rec.ts
    key = (rec.gateway or "", rec.deployment_id)
    streak = own.streaks.get(key)
    if streak is None:
        streak = own.streaks[key] = Streak()
    if streak.hw - ts > o.late_after:  # L1: the worker drops it, so it neither ends a streak nor extends one
        return None
    streak.hw = max(streak.hw, ts)
    if not counted(o, rec):
        return None
    what = outlier.kind(rec)
    start = outlier.began(rec)
    if what is outlier.Kind.ANSWERED:
        if (outlier.ends(streak.latest, streak.latest_began, ts, start) if streak.fired
                else outlier.ends(streak.since, streak.began, ts, start)):  # X10.2, X10.4, X10.5
            streak.in_row, streak.fired, streak.latest, streak.latest_began = 0, False, NEG_INF, NEG_INF
        return None
    if what is outlier.Kind.UNSEEN:
        return None
    if streak.in_row == 0:
        streak.since, streak.began = ts, start
    streak.in_row += 1  # X10.1
    streak.latest = max(streak.latest, ts)
    streak.latest_began = max(streak.latest_began, start)
    if streak.fired or streak.in_row < out.consecutive_single:
        return None
    duration = request_duration(policy, entry, rec.cooldown_time, rec.retry_after, ts)
    if outlier.gate(policy, entry, duration) is not None:
        return None
    streak.fired = True
    candidate = Candidate("consecutive_failures", duration, Window(streak.since, 0, streak.in_row))
    cd = emit_fresh(o, entry, candidate, rec, Failure(rec.status_code, exception_name(rec.exception_type), ts))
    return None if cd is None else provisional(o, cd)

"""The in-pod fast path's rule: the cooldowns that one outcome record decides on its own.

A gateway pod cannot see the fleet's windows, counters or re-cool state, so it may only act on a record when
the worker's decision for it does not depend on them. `prefetch` runs the engine's own `step_outcome` on a
fresh state (nothing counted before this record) and keeps its cooldown only when every state the worker
could hold leads to the same cooldown:

- V2.1 `rate_limited`: a 429 in a group of several deployments cools whatever the window says;
- a non-retryable status (401, 404, ...) on the V2 path: V2.2-V2.4 all cool it, only the reason differs;
- a V1 allowed-fails rule whose first failure already cools (threshold 0): the count can only be >= 1;
- X6 `quota_exhausted` (opt-in): a success announcing a spent budget reads the record and the policy only;

with the duration T1-T4 (Retry-After, per-deployment and per-record values), which reads the record and the
policy only. X3 max ejection percent makes the outcome depend on fleet state (the group's fleet-wide cooldowns
may suppress it) and switches the fast path off entirely. Under X2 backoff the pod's cooldown is the first step,
max(D, base): the worker's for the same record has a streak of at least 1, so it ends no earlier, and its record
(same `event_id`) extends the pod's through the never-shorten write and the push. E2 `recool: extend` may absorb
the worker's cooldown when a later-ending one is in force; Redis then holds that later one, which the
never-shorten write keeps, so the pod's write changes nothing there.

What the worker emits for the same record then has the same `event_id`, `deployment_id`, `ts`, `until`,
`cooldown_time`, `status_code`, `exception_type` and `exception_received`, hence the same LiteLLM value in
Redis; `reason` and `window` are the fast path's best knowledge (the worker's window holds the fleet's counts,
and a non-retryable failure may be a `failure_rate` there). Assumed, as everywhere in coolant: the pod's clock
is within `late_after` of the fleet's (L1), and the pod reads the worker's config (same registry and options).

PF (docs/windows.md §6): with D7 on, a pod that keeps its own LiteLLM counters (`OwnCounters`, fed every record
it publishes, in publish order) also decides V2.2/V2.3 on them, which is what the worker does on that
publisher's counters. Under X8 `recool_coalesce: S` whether the worker absorbs a re-cool depends on the
cooldown in force fleet-wide, which the pod does not know; but X8 only absorbs a candidate when the cooldown in
force ends later than `until - S`, so the pod applies that much at once (PF7, `provisional`) and the worker's
own record, if it emits one, extends it through the push.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coolant.processors import ejection, windows
from coolant.processors.decide import decide, retryable
from coolant.processors.dispositions import Skip
from coolant.processors.engine import counted, emit_fresh, failure_of, step_outcome
from coolant.processors.outlier import REASONS as OUTLIER_REASONS
from coolant.processors.policy import Options, Policy
from coolant.processors.state import NEG_INF, PathState, PodCounters
from coolant.schemas import Cooldown, Outcome
from coolant.schemas.cooldown import whole_as_int

MAX_KEYS = 100_000
"""(gateway, deployment) pairs a pod tracks at most (PF5); past that its D7 fast path stops, with a warning."""


@dataclass(slots=True)
class OwnCounters:
    """PF1: a pod's own D7 counters, per (gateway, deployment), plus the newest ts it published (its own L1)."""

    counters: dict[tuple[str, str], PodCounters] = field(default_factory=dict)
    hw: float = NEG_INF
    gc_next: float = NEG_INF
    off: str | None = None
    """Why the counters are no longer the worker's (PF4, PF5); once set they are never used again."""
    max_keys: int = MAX_KEYS


def fleet_dependent(policy: Policy) -> bool:
    """True when the options make every cooldown's existence depend on fleet state (X3 ejection: the group's
    fleet-wide cooldowns may suppress it). X8 is not one: PF7 bounds what it can absorb. Nor is X2: on a fresh
    state backoff gives the first step, max(D, base), and the worker's step for the same record is never shorter,
    so the pod holds a part of the worker's cooldown, as under PF7."""
    return ejection.enabled(policy.options)


def provisional(o: Options, cd: Cooldown) -> Cooldown | None:
    """PF7: under X8 (`recool: extend`), the part of the worker's cooldown for this record that holds whatever
    the worker absorbs: X8 absorbs only under a cooldown in force that ends after `until - S`, E2 under one that
    ends at or after `until`, else the worker emits `until`. So the pod holds `until - S` (None if that is not
    after ts); `cooldown_time` is `until - S - ts`, so LiteLLM's `timestamp + cooldown_time` is that end exactly.
    Same `event_id`: the worker's record for the trigger, if it emits one, is the same cooldown, S longer."""
    s = o.recool_coalesce
    if s is None or o.recool != "extend":
        return cd
    until = cd.until - s  # a double >= ts; any end X8 absorbs under is a double > the exact cd.until - s
    if until <= cd.ts:
        return None
    return Cooldown(event_id=cd.event_id, deployment_id=cd.deployment_id, model_group=cd.model_group, ts=cd.ts,
                    until=until, cooldown_time=whole_as_int(until - cd.ts), reason=cd.reason,
                    status_code=cd.status_code, exception_type=cd.exception_type,
                    exception_received=cd.exception_received, trigger_event_id=cd.trigger_event_id,
                    window=cd.window)


def count_own(policy: Policy, own: OwnCounters, rec: Outcome) -> PodCounters | None:
    """PF1-PF2: count one record the pod published as the worker counts it for its publisher (O1, O3, N2, LC2,
    LC5); the counters after it, or None when the worker will not count it or the counters are incomplete."""
    o = policy.options
    ts = rec.ts
    if own.off is not None or not o.litellm_counters:
        return None
    if own.hw - ts > o.late_after:  # PF4: the pod's clock went back; what it discarded may be needed again
        own.off = f"a record {own.hw - ts:.0f} s older than the newest one (late_after {o.late_after:g} s)"
        return None
    if not counted(o, rec):
        return None
    if ts > own.hw:
        own.hw = ts
        if ts >= own.gc_next:  # PF5: once per minute of ts, as L3 does
            own.gc_next = (ts // 60 + 1) * 60
            _discard(own, ts - o.late_after)
    key = (rec.gateway or "", rec.deployment_id)
    pod = own.counters.get(key)
    if pod is None:
        if len(own.counters) >= own.max_keys:
            _discard(own, own.hw - o.late_after)
            if len(own.counters) >= own.max_keys:
                own.off = f"more than {own.max_keys} deployments with live counters"
                return None
        pod = own.counters[key] = PodCounters()
    windows.bump(pod, ts, rec.ok)
    return pod


def _discard(own: OwnCounters, horizon: float) -> None:
    """LC5 on the pod's clock: counters every record the pod can still publish in time would re-anchor."""
    for key in [k for k, c in own.counters.items() if windows.spent(c, horizon)]:
        del own.counters[key]


def by_own_counters(policy: Policy, rec: Outcome, pod: PodCounters) -> Cooldown | None:
    """PF2: V2.2 or V2.3 on the publisher's own counters (LC3, LC4), after the gate and mode (no window)."""
    gated = failure_of(policy, rec)
    if isinstance(gated, Skip):
        return None
    entry, failure, duration = gated
    verdict = decide(policy, entry, PathState(), failure, duration, None, windows.litellm_counts(pod, rec.ts))
    if isinstance(verdict, Skip) or verdict.reason not in ("total_outage", "failure_rate"):
        return None  # V1 (its counters are the fleet's) or below threshold
    return emit_fresh(policy.options, entry, verdict, rec, failure)


def prefetch(policy: Policy, rec: Outcome, own: OwnCounters | None = None) -> Cooldown | None:
    """The cooldown the worker will emit for `rec` whatever the fleet's state, else None (under X8, the part of
    it PF7 holds). With `own` (every record the pod publishes goes through here, in publish order) also PF2's
    decisions on the pod's counters."""
    cd = _decided(policy, rec, own)
    return None if cd is None else provisional(policy.options, cd)


def _decided(policy: Policy, rec: Outcome, own: OwnCounters | None) -> Cooldown | None:
    if fleet_dependent(policy):
        return None
    pod = None if own is None else count_own(policy, own, rec)
    if rec.ok:  # only X6 cools on a success, and only from what the record announces
        if policy.options.quota is None or rec.ratelimit is None:
            return None
        cd = step_outcome(policy, PathState(), rec).cooldown
        return cd if cd is not None and cd.reason == "quota_exhausted" else None
    cd = step_outcome(policy, PathState(), rec).cooldown
    if cd is None or cd.reason in OUTLIER_REASONS:  # X10/X11 read the fleet's streak and recent buckets
        return None if pod is None else by_own_counters(policy, rec, pod)
    if cd.reason == "allowed_fails":  # counted 1 on a fresh counter and cooled: the threshold is 0 (or less)
        return cd
    status = cd.status_code
    assert status is not None  # the gate stops null statuses
    if (status == 429 and not policy.single(cd.model_group)) or not retryable(status):
        return cd
    return None if pod is None else by_own_counters(policy, rec, pod)

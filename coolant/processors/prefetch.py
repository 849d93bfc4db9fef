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
policy only. The options that make the outcome depend on fleet state switch the fast path off entirely:
X2 backoff (the duration grows with the fleet's streak) and X3 max ejection percent (the group's fleet-wide
cooldowns may suppress it). E2 `recool: extend` may absorb the worker's cooldown when a later-ending one is in
force; Redis then holds that later one, which the never-shorten write keeps, so the pod's write changes
nothing there.

What the worker emits for the same record then has the same `event_id`, `deployment_id`, `ts`, `until`,
`cooldown_time`, `status_code`, `exception_type` and `exception_received`, hence the same LiteLLM value in
Redis; `reason` and `window` are the fast path's best knowledge (the worker's window holds the fleet's counts,
and a non-retryable failure may be a `failure_rate` there). Assumed, as everywhere in coolant: the pod's clock
is within `late_after` of the fleet's (L1), and the pod reads the worker's config (same registry and options).
"""

from __future__ import annotations

from coolant.processors import ejection
from coolant.processors.decide import retryable
from coolant.processors.engine import step_outcome
from coolant.processors.policy import Policy
from coolant.processors.state import PathState
from coolant.schemas import Cooldown, Outcome


def fleet_dependent(policy: Policy) -> bool:
    """True when the options make every cooldown depend on fleet state (X2 backoff, X3 ejection)."""
    o = policy.options
    return o.backoff is not None or ejection.enabled(o)


def prefetch(policy: Policy, rec: Outcome) -> Cooldown | None:
    """The cooldown the worker will emit for `rec` whatever the fleet's state, else None."""
    if fleet_dependent(policy):
        return None
    if rec.ok:  # only X6 cools on a success, and only from what the record announces
        if policy.options.quota is None or rec.ratelimit is None:
            return None
        cd = step_outcome(policy, PathState(), rec).cooldown
        return cd if cd is not None and cd.reason == "quota_exhausted" else None
    cd = step_outcome(policy, PathState(), rec).cooldown
    if cd is None:
        return None
    if cd.reason == "allowed_fails":  # counted 1 on a fresh counter and cooled: the threshold is 0 (or less)
        return cd
    status = cd.status_code
    assert status is not None  # the gate stops null statuses
    if (status == 429 and not policy.single(cd.model_group)) or not retryable(status):
        return cd
    return None  # total_outage or failure_rate on one record: the fleet's window decides

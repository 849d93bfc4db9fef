"""X3 max ejection percent: a group-level filter downstream of every per-deployment rule.

It is the only stage that sees several deployments at once, so it keeps its own small state
(per group: deployment -> `until` of its last cooldown that passed) and never feeds back.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from coolant.processors.policy import Options, Policy

GroupEjections = MutableMapping[str, float]
"""deployment_id -> until of its latest emitted (unsuppressed) cooldown."""


def enabled(o: Options) -> bool:
    """X3 is on below 100 %: every cooldown is then a candidate the group filter admits or suppresses."""
    return o.max_ejection_percent < 100


def ejection_limit(policy: Policy, group: str) -> int:
    return max(1, policy.registry.size(group) * policy.options.max_ejection_percent // 100)


def passes(policy: Policy, active: GroupEjections, deployment_id: str, ts: float, until: float) -> bool:
    """Admit or suppress one cooldown of `deployment_id` starting at ts; records it when admitted."""
    if not enabled(policy.options):  # the policy may have changed since the candidate was decided
        return True
    mine = active.get(deployment_id)
    if mine is None or mine <= ts:
        group = policy.registry.get(deployment_id)
        limit = ejection_limit(policy, group.model_group) if group is not None else 1
        others = sum(1 for d, u in active.items() if d != deployment_id and u > ts)
        if others >= limit:
            return False
    active[deployment_id] = until
    return True

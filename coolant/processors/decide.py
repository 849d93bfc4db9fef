"""The per-record decision: gate (G1-G7), mode (M1-M4), V2 (§3.5) and V1 (§3.6) rules.

Pure functions over plain data. Each returns either a skip reason (`Skip`) or a `Candidate`.
"""

from __future__ import annotations

from fractions import Fraction

from coolant.processors import categories as cat
from coolant.processors.dispositions import Skip
from coolant.processors.duration import counter_lifetime
from coolant.processors.policy import DeploymentEntry, Options, Policy
from coolant.processors.state import Counter, PathState
from coolant.processors.value import value
from coolant.schemas import Reason, Window

EXCLUDED_TYPES = frozenset(
    {
        "APIConnectionError",
        "CallerCredentialAuthenticationError",
        "CallerCredentialRateLimitError",
        "MalformedRequestFieldError",
        "UnsupportedEndpointError",
    }
)
_PASSING_4XX = frozenset({401, 402, 404, 408, 429})
_RETRYABLE_4XX = frozenset({408, 409, 429})
DEFAULT_ALLOWED_FAILS = 3


@value
class Failure:
    """A failed record as the rules see it: after N1 (name) and N2 (pre-call checks)."""

    status: int | None
    name: str | None
    ts: float

    @property
    def categories(self) -> tuple[str, ...]:
        return cat.categories(self.name, self.status)


@value
class Candidate:
    """A cooldown the rules ask for, before backoff, re-cool and ejection filtering."""

    reason: Reason
    duration: float
    window: Window


def gate(policy: Policy, entry: DeploymentEntry | None, failure: Failure, duration: float | None) -> Skip | None:
    """G1-G7; the skip reason of the first rule that stops the failure. `duration` None skips G5 (H2)."""
    if entry is None:
        return Skip.UNKNOWN_DEPLOYMENT
    status = failure.status
    if status is None:
        return Skip.NO_STATUS
    if failure.name in EXCLUDED_TYPES:
        return Skip.EXCLUDED_TYPE
    if policy.router.disable_cooldowns:
        return Skip.DISABLED
    if duration is not None and duration == 0:
        return Skip.ZERO_DURATION
    if exempt(entry, failure):
        return Skip.STATUS_EXEMPT
    if entry.wildcard:
        return Skip.WILDCARD
    return None


def exempt(entry: DeploymentEntry, failure: Failure) -> bool:
    """G6 stops the failure: its status is the caller's request (400, 403, 409, 422, ...), not the deployment,
    and the deployment's own policy has no entry for it. A null status is G2's, not G6's."""
    status = failure.status
    return (
        status is not None
        and not _status_passes(status)
        and cat.resolve(entry.allowed_fails_policy, failure.categories) is None
    )


def _status_passes(status: int) -> bool:
    """G6: 401, 402, 404, 408, 429, any 5xx, and anything below 400 pass."""
    return status >= 500 or status < 400 or status in _PASSING_4XX


def retryable(status: int) -> bool:
    return status >= 500 or status in _RETRYABLE_4XX


def decide(
    policy: Policy,
    entry: DeploymentEntry,
    ps: PathState,
    failure: Failure,
    duration: float,
    window: Window | None,
    counters: Window | None = None,
) -> Candidate | Skip:
    """M1-M4 then V2 or V1. `window` holds the V2 counts, `counters` the D7 view (None: off or health path);
    V1 uses its own counters. A pod (PF2) has no window (None): only V2.2 and V2.3 on its counters decide."""
    group = entry.model_group
    status = failure.status
    assert status is not None  # the gate stopped null statuses
    single = policy.single(group)
    if status == 402 and single:
        return Skip.SINGLE_402
    if entry.allowed_fails is not None or entry.allowed_fails_policy is not None:
        return _deployment_v1(policy, entry, ps, failure, duration)
    router = policy.router
    if router.allowed_fails is not None or router.allowed_fails_policy is not None:
        return _router_v1(policy, entry, ps, failure, duration)
    o = policy.options
    reason = None if window is None else v2_reason(o, status, single, window.successes, window.failures)
    if counters is not None and reason in _NOT_BY_COUNTS:
        # D7: V2.2 and V2.3 also hold on LiteLLM's own counters; the window view was checked first, so every
        # decision it makes is unchanged, window included.
        by_counts = count_reason(o, single, counters.successes, counters.failures)
        if by_counts is not None:
            return Candidate(by_counts, duration, counters)
    return Skip.BELOW_THRESHOLD if reason is None or window is None else Candidate(reason, duration, window)


_NOT_BY_COUNTS = (None, "non_retryable")
"""What `v2_reason` gives when neither V2.2 nor V2.3 held (nor V2.1)."""


def count_reason(o: Options, single: bool, s: int, f: int) -> Reason | None:
    """V2.2 then V2.3 on one view of the counts."""
    n = s + f
    if f == n and n >= o.outage_min_requests:
        return "total_outage"
    if not single and n >= o.min_requests and over_rate(f, n, o.failure_rate):
        return "failure_rate"
    return None


def v2_reason(o: Options, status: int, single: bool, s: int, f: int) -> Reason | None:
    """V2.1-V2.5, the first rule that matches."""
    if status == 429 and not single:
        return "rate_limited"
    by_counts = count_reason(o, single, s, f)
    if by_counts is not None:
        return by_counts
    if not retryable(status):
        return "non_retryable"
    return None


def over_rate(f: int, n: int, rate: float) -> bool:
    """f/n > rate, compared exactly in integers (2*f > n at the default 0.5)."""
    if rate == 0.5:
        return 2 * f > n
    frac = Fraction(str(rate))
    return f * frac.denominator > frac.numerator * n


def _router_v1(
    policy: Policy, entry: DeploymentEntry, ps: PathState, failure: Failure, duration: float
) -> Candidate | Skip:
    """Q1-Q4: router-level allowed fails, one counter shared by every category."""
    router = policy.router
    afp = router.allowed_fails_policy
    e_r = cat.resolve(afp, failure.categories) if afp else None  # `categories` is computed: only where it can match
    if e_r is None and policy.lone(entry.model_group):
        return Skip.LONE_EXEMPT
    if e_r is not None:
        threshold = e_r[1]
    elif router.allowed_fails is not None:
        threshold = router.allowed_fails
    else:
        threshold = DEFAULT_ALLOWED_FAILS
    return _count(policy, entry, ps, "", threshold, failure.ts, duration)


def _deployment_v1(
    policy: Policy, entry: DeploymentEntry, ps: PathState, failure: Failure, duration: float
) -> Candidate | Skip:
    """P1-P4: deployment-level allowed fails."""
    cats = failure.categories
    e_d = cat.resolve(entry.allowed_fails_policy, cats)
    e_r = cat.resolve(policy.router.allowed_fails_policy, cats)
    if e_d is None and policy.lone(entry.model_group) and (entry.allowed_fails is not None or e_r is None):
        return Skip.LONE_EXEMPT
    threshold: int
    if e_d is not None:
        threshold = e_d[1]
    elif entry.allowed_fails is not None:
        threshold = entry.allowed_fails
    elif e_r is not None:
        threshold = e_r[1]
    elif policy.router.allowed_fails is not None:
        threshold = policy.router.allowed_fails
    else:
        threshold = DEFAULT_ALLOWED_FAILS
    if e_d is not None:
        suffix = failure.name if cat.is_known_name(failure.name) else cat.CANONICAL_NAME[e_d[0]]
    elif entry.allowed_fails is not None:
        suffix = "generic"
    else:
        suffix = ""
    return _count(policy, entry, ps, suffix or "", threshold, failure.ts, duration)


def _count(
    policy: Policy, entry: DeploymentEntry, ps: PathState, suffix: str, threshold: int, ts: float, duration: float
) -> Candidate | Skip:
    """C2 then Q4/P4: increment the counter; cool when the count exceeds the threshold."""
    counter = ps.counters.get(suffix)
    if counter is None or ts >= counter.expires:
        counter = Counter(ts, ts + counter_lifetime(policy, entry), 1)
        ps.counters[suffix] = counter
    else:
        counter.count += 1
    if counter.count > threshold:
        return Candidate("allowed_fails", duration, Window(counter.anchor, 0, counter.count))
    return Skip.BELOW_THRESHOLD

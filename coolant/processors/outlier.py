"""The outlier-detection profile's own rules (docs/outlier.md, X9-X13), beside the compatible ones.

LiteLLM's rules wait for a minute's evidence and never cool a group's only deployment; a fleet sees each
deployment's records in one order (its partition), so it can tell "k failures in a row" and "most of the last
few seconds failed" as they happen. These functions read and update only the request-path state they are
given; the engine calls them (`step_outcome`) after the compatible verdict, so every compatible rule still holds
under the profile and the profile only adds cooldowns.
"""

from __future__ import annotations

from enum import Enum

from coolant.processors.decide import Candidate, over_rate
from coolant.processors.dispositions import Skip
from coolant.processors.policy import DeploymentEntry, Outlier, Policy
from coolant.processors.state import PathState
from coolant.schemas import Outcome, Reason, Window

BUCKET = 1
"""Seconds per X11 bucket: the recent window is `rate_window` whole buckets, the record's own included."""
HORIZON = 60
"""The longest `rate_window`: L3 keeps the buckets any record still in time can read."""
REASONS: tuple[Reason, ...] = ("consecutive_failures", "recent_failure_rate")

CALLER_TYPES = frozenset(
    {
        "CallerCredentialAuthenticationError",
        "CallerCredentialRateLimitError",
        "MalformedRequestFieldError",
        "UnsupportedEndpointError",
    }
)
"""G3's names other than APIConnectionError: the caller's credentials or request, never the deployment."""
GATEWAY_NAMES = frozenset(
    {
        "APIConnectionError",
        "Timeout",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "MidStreamFallbackError",
        "APIError",
    }
)
"""X9: names that say the deployment failed when no status came with them (a reset connection, a timeout, a
stream that died mid-answer: LiteLLM reports those as `APIConnectionError` or `Timeout` with no status)."""
TRANSPORT_NAMES = frozenset(
    {
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "ConnectError",
        "NetworkError",
        "ProtocolError",
        "ReadTimeout",
        "WriteTimeout",
        "ConnectTimeout",
        "TimeoutException",
    }
)
"""X9.6: httpx's names for a connection to the deployment that failed. LiteLLM hands its logging hooks a stream's
raw transport error when the stream fails after it opened, unmapped: a stream that ended without a finish_reason
(truncated) or whose connection closed mid-body is a `RemoteProtocolError`, one whose read timed out a `ReadTimeout`.
The gateway's own side (`PoolTimeout`, `LocalProtocolError`, `ProxyError`) is not the deployment's."""


class Kind(Enum):
    """What a counted outcome is to the profile (X9)."""

    FAILED = "failed"
    """5xx, timeout, connection error, a stream cut mid-answer: extends the streak, counts as a failure."""
    ANSWERED = "answered"
    """The deployment answered (a success, a 429, a 401, a 400...): ends the streak, counts in the volume."""
    UNSEEN = "unseen"
    """Not the deployment's doing (the caller went away, a router's pre-call check): neither."""


def kind(rec: Outcome) -> Kind:
    """X9 for a counted outcome (after the spec's O3 and N2 ignored what they ignore)."""
    if rec.ok:
        return Kind.ANSWERED
    if rec.source == "pre_call_check" or rec.origin == "caller":
        return Kind.UNSEEN
    status = rec.status_code
    if status == 499:  # "client closed request"
        return Kind.UNSEEN
    name = rec.exception_type
    if name is not None:
        name = name.rpartition(".")[2]  # N1
        if name in CALLER_TYPES:
            return Kind.UNSEEN
    if status is None:
        return Kind.FAILED if name is None or name in GATEWAY_NAMES or name in TRANSPORT_NAMES else Kind.ANSWERED
    return Kind.FAILED if status >= 500 or status == 408 else Kind.ANSWERED


def began(rec: Outcome) -> float:
    """When the attempt began: its ts less its latency (the ts alone when the publisher gave none)."""
    latency = rec.latency_ms
    return rec.ts if latency is None else rec.ts - latency / 1000.0


def ends(since: float, first_began: float, ts: float, start: float) -> bool:
    """X10.2, X10.4, X10.5: an answer at `ts` whose attempt began at `start` ends a streak whose first failure is
    at `since` and began at `first_began`. The worker's streak and the pod's own (PF8) end by this one rule."""
    return ts >= since and start >= first_began


def answered(ps: PathState, ts: float, start: float) -> None:
    """X10.2 and X11.1 for an answer (ts, and `start`, when its attempt began): the streak ends, unless the answer
    is older than the streak's first failure (X10.4: LiteLLM's proxy reports a failure from the request's
    exception path but queues a success for its logging worker, so under load answers from before an incident
    reach the partition after its first failures, and would reset the streak every time) or its attempt began
    before that failure's did (X10.5: a stream admitted before the incident that ends after its first failure);
    the answer counts in its bucket."""
    if ends(ps.in_row_since, ps.in_row_began, ts, start):
        ps.in_row = 0
    cell = ps.recent.get(k := int(ts // BUCKET))
    if cell is None:
        ps.recent[k] = [1, 0]
    else:
        cell[0] += 1


def observe(ps: PathState, rec: Outcome) -> Kind:
    """X10.1-X10.2 and X11.1: one counted outcome into the streak and the recent buckets; returns its kind."""
    what = kind(rec)
    if what is Kind.ANSWERED:
        answered(ps, rec.ts, began(rec))
    elif what is Kind.FAILED:
        ts = rec.ts
        if ps.in_row == 0:
            ps.in_row_since = ts
            ps.in_row_began = began(rec)
        ps.in_row += 1
        cell = ps.recent.get(k := int(ts // BUCKET))
        if cell is None:
            ps.recent[k] = [0, 1]
        else:
            cell[1] += 1
    return what


def gate(policy: Policy, entry: DeploymentEntry | None, duration: float) -> Skip | None:
    """X9.4: the compatible gate's rules that still hold for a failure the profile counts (G1, G4, G5, G7), and
    X12: a group's only deployment is cooled only when the group has fallbacks (R4: not lone)."""
    if entry is None:
        return Skip.UNKNOWN_DEPLOYMENT
    if policy.router.disable_cooldowns:
        return Skip.DISABLED
    if duration == 0:
        return Skip.ZERO_DURATION
    if entry.wildcard:
        return Skip.WILDCARD
    if policy.lone(entry.model_group):
        return Skip.LONE_EXEMPT
    return None


def recent_counts(ps: PathState, ts: float, seconds: int) -> tuple[float, int, int]:
    """X11.2: (window start, outcomes, counted failures) over the `seconds` one-second buckets ending with ts's."""
    last = int(ts // BUCKET)
    first = last - seconds // BUCKET + 1
    n = f = 0
    recent = ps.recent
    for k in range(first, last + 1):
        cell = recent.get(k)
        if cell is not None:
            n += cell[0] + cell[1]
            f += cell[1]
    return float(first * BUCKET), n, f


def rule(policy: Policy, out: Outlier, entry: DeploymentEntry, ps: PathState, ts: float, duration: float) -> (
    Candidate | None
):
    """X10 (k counted failures in a row; k by group size, X12), then X11 (the recent failure share), for a counted
    failure that passed `gate`. X10 starts a new streak once it fires (X10.3)."""
    k = out.consecutive_single if policy.single(entry.model_group) else out.consecutive
    if ps.in_row >= k:
        count = ps.in_row
        ps.in_row = 0
        return Candidate("consecutive_failures", duration, Window(ps.in_row_since, 0, count))
    start, n, f = recent_counts(ps, ts, out.rate_window)
    if n >= out.rate_min_requests and over_rate(f, n, out.rate_threshold):
        return Candidate("recent_failure_rate", duration, Window(start, n - f, f))
    return None


def discard(ps: PathState, horizon: float) -> None:
    """L3 for the recent buckets: those no record at or after `horizon` (hw - late_after) can read."""
    recent = ps.recent
    for k in [k for k in recent if (k + 1) * BUCKET <= horizon - HORIZON]:
        del recent[k]

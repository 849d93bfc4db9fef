"""What a policy would have done to recorded traffic: pure functions over timestamps and intervals.

Everything here takes plain numbers, so each figure can be checked by hand on a few records.
Conventions, shared by every function:

- A cooldown is the half-open interval `[start, until)`: a record at `ts` is inside when
  `start <= ts < until` (the routers' "cooled while now < timestamp + cooldown_time").
- Timestamps of one deployment's records are given **sorted** (`sorted_ts` arguments).
- "Failures" and "successes" are the recorded outcomes of one deployment (see `coolant.tuning.traffic`
  for which records count). The recording is what happened *without* these cooldowns, so a failure
  inside a would-be cooldown is a failure the cooldown would have kept callers away from (avoided),
  and a success inside one is capacity the cooldown would have given up (diverted).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

__all__ = [
    "CooldownSpan",
    "DeploymentTraffic",
    "Incident",
    "PolicyFigures",
    "count_inside",
    "detection_delays",
    "failures_avoided",
    "flap_flags",
    "flaps",
    "incidents",
    "merge",
    "percentile",
    "policy_figures",
    "successes_diverted",
    "union_length",
]


class CooldownSpan(NamedTuple):
    """One would-be cooldown of one deployment.

    `trigger_counted` is true when the record that caused it is one of the deployment's counted
    failures (an outcome with `ok: false`); that record is never counted as avoided by its own
    cooldown. A cooldown caused by a health probe has no such record.
    """

    start: float
    until: float
    reason: str = "rate_limited"
    trigger_counted: bool = True


_START, _UNTIL, _REASON, _INTERVAL = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(0, 1)
"""A `CooldownSpan`'s start, until, reason and (start, until), read in C."""


class Incident(NamedTuple):
    """A run of one deployment's failures with no gap longer than the quiet gap."""

    first: float
    last: float
    failures: int


# --------------------------------------------------------------------------------------------
# Intervals.


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of half-open intervals as disjoint, sorted intervals; empty ones are dropped.

    `[0, 10)` and `[10, 20)` merge into `[0, 20)`: no instant between them is uncovered.
    """
    out: list[tuple[float, float]] = []
    for start, until in sorted(intervals):
        if until <= start:
            continue
        if out and start <= out[-1][1]:
            if until > out[-1][1]:
                out[-1] = (out[-1][0], until)
        else:
            out.append((start, until))
    return out


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total time covered by at least one interval (seconds cooled, overlaps counted once)."""
    return sum(until - start for start, until in merge(intervals))


def count_inside(sorted_ts: Sequence[float], merged: Sequence[tuple[float, float]]) -> int:
    """How many timestamps fall inside the union `merged` (as returned by `merge`)."""
    return sum(bisect_left(sorted_ts, until) - bisect_left(sorted_ts, start) for start, until in merged)


# --------------------------------------------------------------------------------------------
# Per-deployment figures.


def successes_diverted(success_ts: Sequence[float], spans: Sequence[CooldownSpan]) -> int:
    """Successful records inside a would-be cooldown: capacity the policy would have given up."""
    return count_inside(success_ts, merge((s.start, s.until) for s in spans))


def failures_avoided(failure_ts: Sequence[float], spans: Sequence[CooldownSpan]) -> int:
    """Failed records inside a would-be cooldown, not counting a cooldown's own trigger.

    A trigger still counts as avoided when *another* cooldown already covers it: one that started
    earlier, or at the same instant but earlier in `spans` (emission order), so it would not have
    been sent. Only the trigger record is excluded: another failure at the same `ts` is inside.
    """
    live = [s for s in spans if s.until > s.start]
    if not live:
        return 0
    merged = merge((s.start, s.until) for s in live)
    return _avoided(failure_ts, live, merged, sorted(s.start for s in live))


def _avoided(
    failure_ts: Sequence[float], live: Sequence[CooldownSpan], merged: Sequence[tuple[float, float]],
    starts: Sequence[float],
) -> int:
    """`failures_avoided` of the non-empty spans `live`, given their union (`merge`) and sorted starts."""
    inside = count_inside(failure_ts, merged)
    untils = sorted(s.until for s in live)
    same_start: dict[float, int] = {}
    used: dict[float, int] = {}
    for s in live:
        start = s.start
        # spans with start < ts < until (a span ending at or before ts started before it, too)
        before = same_start.get(start, 0)
        earlier = bisect_left(starts, start) - bisect_right(untils, start) + before
        same_start[start] = before + 1
        # exclude the trigger: only a failure really there at that instant (and not already excluded)
        if s.trigger_counted and earlier == 0:
            at = bisect_right(failure_ts, start) - bisect_left(failure_ts, start)
            done = used.get(start, 0)
            if at > done:
                used[start] = done + 1
                inside -= 1
    return inside


def incidents(failure_ts: Sequence[float], quiet_gap: float) -> list[Incident]:
    """Split sorted failure times into incidents: a gap longer than `quiet_gap` starts a new one."""
    out: list[Incident] = []
    first = last = 0.0
    n = 0
    for ts in failure_ts:
        if n and ts - last > quiet_gap:
            out.append(Incident(first, last, n))
            n = 0
        if n == 0:
            first = ts
        last = ts
        n += 1
    if n:
        out.append(Incident(first, last, n))
    return out


def detection_delays(found: Sequence[Incident], sorted_starts: Sequence[float]) -> list[float | None]:
    """Per incident: the first cooldown start in `[first, last]` minus `first`; None if none starts there."""
    out: list[float | None] = []
    for inc in found:
        i = bisect_left(sorted_starts, inc.first)
        out.append(sorted_starts[i] - inc.first if i < len(sorted_starts) and sorted_starts[i] <= inc.last else None)
    return out


def flap_flags(spans: Sequence[CooldownSpan], flap_window: float) -> list[bool]:
    """Per span (in the given order): does it start within `flap_window` s after the deployment was released?

    Spans are considered in start order; "released" is the latest `until` of the earlier ones. A
    cooldown that starts while the deployment is still cooled is an extension, not a flap: the
    deployment never came back. One that starts at `end <= start <= end + flap_window` is a flap.
    """
    flags = [False] * len(spans)
    end = -math.inf
    # in (start, until, position) order: the tuples sorted are the keys themselves
    for start, until, i in sorted(zip(map(_START, spans), map(_UNTIL, spans), range(len(spans)), strict=True)):
        flags[i] = end <= start <= end + flap_window
        end = max(end, until)
    return flags


def flaps(spans: Sequence[CooldownSpan], flap_window: float) -> int:
    """How many cooldowns flap (see `flap_flags`)."""
    return sum(flap_flags(spans, flap_window))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of unsorted values; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


# --------------------------------------------------------------------------------------------
# One policy over the whole recording.


@dataclass(frozen=True, slots=True)
class DeploymentTraffic:
    """One deployment's recorded outcomes (sorted times) and its incidents (policy-independent)."""

    failures: tuple[float, ...] = ()
    successes: tuple[float, ...] = ()
    incidents: tuple[Incident, ...] = ()


@dataclass(slots=True)
class PolicyFigures:
    """Every figure of one policy; `to_dict` is what the CSV and JSON reports carry."""

    cooldowns: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    suppressed: int = 0
    failures: int = 0
    failures_avoided: int = 0
    successes: int = 0
    successes_diverted: int = 0
    cooled_seconds: float = 0.0
    cooled_by_deployment: dict[str, float] = field(default_factory=dict)
    incidents: int = 0
    detected: int = 0
    delay_mean: float | None = None
    delay_median: float | None = None
    delay_p95: float | None = None
    delay_max: float | None = None
    flaps: int = 0
    flaps_by_deployment: dict[str, int] = field(default_factory=dict)

    @property
    def undetected(self) -> int:
        return self.incidents - self.detected

    @property
    def flapping_deployments(self) -> int:
        return len(self.flaps_by_deployment)

    @property
    def net(self) -> int:
        return self.failures_avoided - self.successes_diverted

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            "cooldowns": self.cooldowns,
            "by_reason": dict(sorted(self.by_reason.items())),
            "suppressed": self.suppressed,
            "failures": self.failures,
            "failures_avoided": self.failures_avoided,
            "successes": self.successes,
            "successes_diverted": self.successes_diverted,
            "cooled_seconds": r(self.cooled_seconds),
            "incidents": self.incidents,
            "detected": self.detected,
            "undetected": self.undetected,
            "delay_mean": r(self.delay_mean),
            "delay_median": r(self.delay_median),
            "delay_p95": r(self.delay_p95),
            "delay_max": r(self.delay_max),
            "flaps": self.flaps,
            "flapping_deployments": self.flapping_deployments,
            "cooled_by_deployment": {d: r(s) for d, s in sorted(self.cooled_by_deployment.items())},
            "flaps_by_deployment": dict(sorted(self.flaps_by_deployment.items())),
        }


def policy_figures(
    traffic: Mapping[str, DeploymentTraffic],
    spans: Mapping[str, Sequence[CooldownSpan]],
    flap_window: float,
    suppressed: int = 0,
) -> PolicyFigures:
    """All figures of one policy: its would-be cooldowns per deployment against the recorded traffic.

    Deployments with cooldowns but no recorded outcomes (cooled by probes only) count for time
    cooled and flapping. Deployments are visited in sorted order, so float sums are reproducible.
    """
    fig = PolicyFigures(suppressed=suppressed)
    reasons: Counter[str] = Counter()
    delays: list[float] = []
    empty = DeploymentTraffic()
    for dep in sorted(traffic.keys() | spans.keys()):
        t = traffic.get(dep, empty)
        mine = spans.get(dep, ())
        fig.failures += len(t.failures)
        fig.successes += len(t.successes)
        fig.incidents += len(t.incidents)
        if not mine:
            continue
        fig.cooldowns += len(mine)
        reasons.update(map(_REASON, mine))
        merged = merge(map(_INTERVAL, mine))
        cooled = sum(until - start for start, until in merged)
        fig.cooled_seconds += cooled
        fig.cooled_by_deployment[dep] = cooled
        fig.successes_diverted += count_inside(t.successes, merged)
        starts = sorted(map(_START, mine))
        live = [s for s in mine if s.until > s.start]
        if live:  # `failures_avoided`: the union of the live spans is `merged` (merge drops the empty ones)
            fig.failures_avoided += _avoided(
                t.failures, live, merged, starts if len(live) == len(mine) else sorted(s.start for s in live)
            )
        found = [d for d in detection_delays(t.incidents, starts) if d is not None]
        fig.detected += len(found)
        delays.extend(found)
        n = flaps(mine, flap_window)
        if n:
            fig.flaps += n
            fig.flaps_by_deployment[dep] = n
    fig.by_reason = dict(reasons)
    if delays:
        fig.delay_mean = math.fsum(delays) / len(delays)
        fig.delay_median = percentile(delays, 50)
        fig.delay_p95 = percentile(delays, 95)
        fig.delay_max = max(delays)
    return fig

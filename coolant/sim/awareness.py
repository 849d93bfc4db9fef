"""What the simulated routers skip: a deployment is cooled at a moment by a fixed schedule, or by coolant's own
policy engine fed the simulation's records as they happen (a closed loop, fleet-wide or one engine per pod).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence

from coolant.processors import Engine, Policy
from coolant.schemas import Cooldown, Outcome

__all__ = ["CooledFn", "EngineCooldowns", "PodEngineCooldowns", "Schedule", "ScheduleCooldowns", "schedule_of"]

CooledFn = Callable[[str, float], bool]
"""`(deployment_id, ts) -> True` when routers must skip the deployment at `ts`."""
Schedule = Mapping[str, Sequence[tuple[float, float]]]
"""deployment_id -> cooldown intervals `(start, until)`; cooled when start <= ts < until."""


class ScheduleCooldowns:
    """A fixed cooldown schedule as a `CooledFn` (intervals merged, looked up by bisection)."""

    def __init__(self, schedule: Schedule) -> None:
        self._starts: dict[str, list[float]] = {}
        self._ends: dict[str, list[float]] = {}
        for dep, intervals in schedule.items():
            starts: list[float] = []
            ends: list[float] = []
            for start, until in sorted(intervals):
                if until <= start:
                    continue
                if ends and start <= ends[-1]:
                    ends[-1] = max(ends[-1], until)
                else:
                    starts.append(start)
                    ends.append(until)
            self._starts[dep] = starts
            self._ends[dep] = ends

    def __call__(self, deployment_id: str, ts: float) -> bool:
        starts = self._starts.get(deployment_id)
        if not starts:
            return False
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and ts < self._ends[deployment_id][i]


class EngineCooldowns:
    """Closed loop: coolant's policy engine decides the cooldowns the simulated routers obey.

    `simulate` calls `observe` with every record just before yielding it, so a routing decision
    at time t sees the cooldowns decided from every attempt that finished before t, fleet-wide
    (as if the cooldown topic and Redis had no delay). `cooldowns` keeps what was emitted.
    """

    def __init__(self, policy: Policy) -> None:
        self.engine = Engine(policy)
        self.cooldowns: list[Cooldown] = []
        self._until: dict[str, float] = {}

    def observe(self, rec: Outcome) -> None:
        cd = self.engine.feed(rec).cooldown
        if cd is not None:
            self.cooldowns.append(cd)
            if cd.until > self._until.get(cd.deployment_id, -math.inf):
                self._until[cd.deployment_id] = cd.until

    def __call__(self, deployment_id: str, ts: float) -> bool:
        return ts < self._until.get(deployment_id, -math.inf)


class PodEngineCooldowns:
    """LiteLLM alone: every pod decides from its own attempts only, and skips only what it cooled itself.

    One policy engine per pod, fed that pod's records (the compatible profile models LiteLLM's own
    per-process rules, up to the deliberate differences D1-D6). `simulate` asks `cooled_on(pod, ...)`.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.pods: dict[str, EngineCooldowns] = {}
        self.cooldowns: list[Cooldown] = []

    def _pod(self, pod: str) -> EngineCooldowns:
        engine = self.pods.get(pod)
        if engine is None:
            engine = self.pods[pod] = EngineCooldowns(self.policy)
        return engine

    def observe(self, rec: Outcome) -> None:
        engine = self._pod(rec.gateway or "")
        before = len(engine.cooldowns)
        engine.observe(rec)
        self.cooldowns.extend(engine.cooldowns[before:])

    def cooled_on(self, pod: str, deployment_id: str, ts: float) -> bool:
        return self._pod(pod)(deployment_id, ts)

    def __call__(self, deployment_id: str, ts: float) -> bool:
        return any(engine(deployment_id, ts) for engine in self.pods.values())


def schedule_of(cooldowns: Sequence[Cooldown]) -> dict[str, list[tuple[float, float]]]:
    """The schedule (deployment_id -> [(ts, until), ...]) of a list of cooldown records."""
    out: dict[str, list[tuple[float, float]]] = {}
    for cd in cooldowns:
        out.setdefault(cd.deployment_id, []).append((cd.ts, cd.until))
    return out

"""One incident, three deciders: LiteLLM alone, the outlier profile without a prober, and with one (the demo's
closing table, docs/outlier.md).

The incident is the lone primary of issue 24 in the closed-loop simulator: a group `primary` of one deployment
with a fallback group, `num_retries: 2`, steady traffic, and the primary failing (500s) for a minute before it
heals. The same requests meet three deciders:

- LiteLLM alone: each pod decides from its own attempts (`PodEngineCooldowns`, the compatible rules): a lone
  group is never cooled, so every request pays its attempts on the dead primary first;
- the outlier profile without a prober: X10/X12 cool the primary after one failed request, X13's backoff lets
  one real failure through at each step's end;
- the outlier profile with a prober: `ProbedCooldowns` feeds a probe record of every cooled deployment each
  `interval` seconds (healthy unless a fault holds it at that moment), as `coolant probe --cooled-interval`
  does, so RC3 holds the primary while it fails and RC4 releases it as soon as it heals.

Deterministic: the simulator's seeded arrivals and the pure engine, no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from coolant.config.loader import parse_config
from coolant.processors import Policy
from coolant.schemas import Health, Outcome
from coolant.sim.simulate import (
    DEFAULT_START_TS,
    BackgroundLoad,
    EngineCooldowns,
    Fault,
    Group,
    PodEngineCooldowns,
    ProviderKey,
    Scenario,
    SimStats,
    litellm_config,
    simulate,
)

__all__ = ["PRIMARY", "ProbedCooldowns", "Row", "compare", "lone_primary"]

PRIMARY = "primary-1"
FALLBACK = "fallback-1"


def lone_primary(outage: tuple[float, float] = (60.0, 120.0), per_minute: float = 15.0) -> Scenario:
    """The primary/fallback chain of S1's free-tier story: `primary` (one deployment) falls back to
    `fallback`; the primary fails from `outage[0]` to `outage[1]` seconds after the start."""
    def key(name: str) -> ProviderKey:
        return ProviderKey(name, "openai/gpt-4o-mini", rpm=100_000, retry_after=None, api_key_env="OPENAI_KEY")

    return Scenario(
        name="lone-primary",
        groups=(Group("primary", (key(PRIMARY),)), Group("fallback", (key(FALLBACK),))),
        fallbacks={"primary": ("fallback",)},
        agents=None,
        background=BackgroundLoad(requests_per_minute=per_minute, group="primary"),
        faults=(Fault.outage(PRIMARY, *outage),),
        num_retries=2,
        routing="round-robin",
        success_latency_s=(0.3, 0.6),
        cooldown_time=5,
        allowed_fails=None,
    )


class ProbedCooldowns(EngineCooldowns):
    """`EngineCooldowns` with one prober: each `interval` s of event time, a `coolant.health/1` record for every
    deployment cooled at that moment, healthy unless one of `faults` holds it then."""

    def __init__(self, policy: Policy, faults: Sequence[Fault], start_ts: float, interval: float = 1.0) -> None:
        super().__init__(policy)
        self.faults = faults
        self.start_ts = start_ts
        self.interval = interval
        self.probes = 0
        self._tick: int | None = None

    def _failing(self, deployment_id: str, ts: float) -> bool:
        at = ts - self.start_ts
        return any(f.deployment_id == deployment_id and f.start_s <= at < f.end_s for f in self.faults)

    def _probe_until(self, ts: float) -> None:
        last = math.floor(ts / self.interval)
        first = last if self._tick is None else self._tick + 1
        for k in range(first, last + 1):
            t = k * self.interval
            for dep in sorted(d for d, until in self._until.items() if t < until):
                self.probes += 1
                rec = Health(event_id=f"sim-probe-{dep}-{k}", ts=t, deployment_id=dep, model_group="",
                             healthy=not self._failing(dep, t),
                             status_code=500 if self._failing(dep, t) else None)
                step = self.engine.feed(rec)
                if step.cooldown is not None:
                    self.cooldowns.append(step.cooldown)
                    self._until[dep] = max(self._until.get(dep, -math.inf), step.cooldown.until)
                if step.release is not None:
                    self._until[dep] = step.release.ts  # RC4: the routers let it go at once
        self._tick = last

    def observe(self, rec: Outcome) -> None:
        self._probe_until(rec.ts)
        super().observe(rec)

    def __call__(self, deployment_id: str, ts: float) -> bool:
        self._probe_until(ts)
        return super().__call__(deployment_id, ts)


@dataclass(frozen=True, slots=True)
class Row:
    """One decider's account of the incident."""

    decider: str
    primary_attempts_in_outage: int
    requests: int
    failed: int
    back_on_primary_s: float | None
    """From the heal to the first request the primary served (None: never within the run)."""
    probes: int = 0


def compare(scenario: Scenario | None = None, seed: int = 1, duration_s: float = 180.0) -> list[Row]:
    """The incident under each decider (same requests, same seed)."""
    scenario = scenario or lone_primary()
    (fault,) = scenario.faults
    start = DEFAULT_START_TS
    compatible = parse_config(litellm_config(scenario)).policy
    outlier = parse_config(litellm_config(scenario, coolant={"profile": "outlier"})).policy
    deciders: list[tuple[str, EngineCooldowns | PodEngineCooldowns]] = [
        ("LiteLLM alone", PodEngineCooldowns(compatible)),
        ("coolant, outlier profile, no prober", EngineCooldowns(outlier)),
        ("coolant, outlier profile + coolant probe", ProbedCooldowns(outlier, scenario.faults, start)),
    ]
    rows = []
    for name, decider in deciders:
        stats = SimStats()
        records = list(simulate(scenario, start, duration_s, seed=seed, cooldown_aware=decider, stats=stats))
        outage = (start + fault.start_s, start + fault.end_s)
        attempts = sum(1 for r in records if r.deployment_id == PRIMARY and outage[0] <= r.ts < outage[1])
        back = next((r.ts - outage[1] for r in records
                     if r.deployment_id == PRIMARY and r.ok and r.ts >= outage[1]), None)
        rows.append(Row(name, attempts, stats.requests, stats.failed, back,
                        decider.probes if isinstance(decider, ProbedCooldowns) else 0))
    return rows

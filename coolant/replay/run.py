"""Offline replay (contract §5): records from files, in file order, through the same engine as live."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coolant.io.sources import Block
from coolant.native_backend import collector_paused, for_policy, run_all
from coolant.processors import Disposition, Policy, Skip
from coolant.schemas import Cooldown, Health, HealthTransition, Outcome

MAX_INVALID_SAMPLES = 20
_DROPPED = frozenset({Disposition.LATE, Disposition.DUPLICATE})


@dataclass(slots=True)
class DeploymentTotals:
    outcomes: int = 0
    failures: int = 0
    probes: int = 0
    cooldowns: int = 0
    cooled_seconds: float = 0.0
    """Length of the union of this deployment's emitted cooldown intervals."""
    cooled_until: float = float("-inf")

    def add_cooldown(self, cd: Cooldown) -> None:
        self.cooldowns += 1
        start = max(cd.ts, self.cooled_until)
        if cd.until > start:
            self.cooled_seconds += cd.until - start
        self.cooled_until = max(self.cooled_until, cd.until)


@dataclass(slots=True)
class ReplaySummary:
    records: int = 0
    invalid: int = 0
    invalid_samples: list[str] = field(default_factory=list)
    dispositions: Counter[Disposition | Skip] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    suppressed: Counter[tuple[str, str]] = field(default_factory=Counter)
    deployments: defaultdict[str, DeploymentTotals] = field(default_factory=lambda: defaultdict(DeploymentTotals))
    health_updates: int = 0
    health_transitions: int = 0
    backend: str = ""
    """The backend that ran (`native`, or `python` with why auto chose it): printed, not in `to_dict` (the
    output is the same on either)."""

    def add_invalid(self, where_and_problem: str) -> None:
        self.invalid += 1
        if len(self.invalid_samples) < MAX_INVALID_SAMPLES:
            self.invalid_samples.append(where_and_problem)

    @property
    def cooldowns(self) -> int:
        return sum(self.reasons.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "invalid": self.invalid,
            "invalid_samples": self.invalid_samples,
            "dispositions": {str(d): n for d, n in self.dispositions.items()},  # orjson wants exact str keys
            "cooldowns": self.cooldowns,
            "reasons": dict(self.reasons),
            "suppressed": [{"model_group": g, "reason": r, "count": n} for (g, r), n in self.suppressed.items()],
            "health_updates": self.health_updates,
            "health_transitions": self.health_transitions,
            "deployments": {
                d: {
                    "outcomes": t.outcomes,
                    "failures": t.failures,
                    "probes": t.probes,
                    "cooldowns": t.cooldowns,
                    "cooled_seconds": t.cooled_seconds,
                }
                for d, t in sorted(self.deployments.items())
            },
        }


def replay(
    blocks: Iterable[Block],
    policy: Policy,
    emit: Callable[[Cooldown], None],
    transitions: Callable[[HealthTransition], None] | None = None,
    backend: str = "auto",
) -> ReplaySummary:
    """Run every record through one engine, in file order; cooldowns go to `emit` as they are decided, health
    transitions (the live `<prefix>health.transitions` records) to `transitions`. `backend` picks the loop
    (`coolant.native_backend.for_policy`: auto, native or python; the output is the same)."""
    path = for_policy(policy, backend)
    engine = path.engine
    summary = ReplaySummary(backend=f"{path.name} ({path.note})" if path.note else path.name)
    dispositions = summary.dispositions
    deployments = summary.deployments
    # Plain successes are counted by the engine or the native side (`DeploymentState.counted`), added below.
    with collector_paused():
        for rec, step in run_all(path, blocks, summary.add_invalid):
            dispositions[step.disposition] += 1
            if step.disposition in _DROPPED:
                continue  # dropped records count in `dispositions` only
            if type(rec) is Outcome:
                totals = deployments[rec.deployment_id]
                totals.outcomes += 1
                if not rec.ok:
                    totals.failures += 1
            elif type(rec) is Health:
                totals = deployments[rec.deployment_id]
                totals.probes += 1
                if step.health is not None:
                    summary.health_updates += 1
                    if step.transition is not None:
                        summary.health_transitions += 1
                        if transitions is not None:
                            transitions(step.transition)
            else:
                continue  # deployment and cooldown records are only counted ("ignored")
            cd = step.cooldown
            if cd is not None:
                summary.reasons[cd.reason] += 1
                totals.add_cooldown(cd)
                emit(cd)
            elif step.suppressed is not None:
                summary.suppressed[step.suppressed.model_group, step.suppressed.reason] += 1
    for deployment_id, st in engine.states.items():
        if st.counted:
            dispositions[Disposition.COUNTED] += st.counted
            deployments[deployment_id].outcomes += st.counted
    summary.records = path.records + summary.invalid
    return summary

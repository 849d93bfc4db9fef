"""Topic names, partitioning and retention (contract §2): data only, no I/O.

Every input topic is keyed by deployment_id so all of a deployment's records meet in one
partition (and one worker); all keyed topics share one partition count so Faust tables and
the topics they follow stay co-partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.partitioner import murmur2

DAY_MS = 24 * 3600 * 1000
PROBE_OWNERSHIP_PARTITIONS = 12
"""Probe ownership units: 12 splits evenly over 1, 2, 3, 4, 6 or 12 probers."""

CHANGELOG_SUFFIX = "-changelog"
"""Faust names a table's changelog topic `<app id>-<table>-changelog`."""
INTERNAL_SUFFIXES = (CHANGELOG_SUFFIX, "__assignor-__leader")
"""Faust's own topics: table changelogs (recovery, standbys) and the leader-election topic."""


def is_internal_topic(topic: str) -> bool:
    """Faust's own topic, not one the app processes: nothing commits it, no lane reads it."""
    return topic.endswith(INTERNAL_SUFFIXES)


def partition_of(deployment_id: str, partitions: int) -> int:
    """Kafka's default partition of the key `deployment_id`: stable across processes and languages."""
    if partitions <= 0:
        raise ValueError("partitions must be positive")
    return (int(murmur2(deployment_id.encode("utf-8"))) & 0x7FFFFFFF) % partitions


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Topics:
    """The names under one prefix (default `coolant.`)."""

    prefix: str = "coolant."

    @property
    def outcomes(self) -> str:
        return self.prefix + "outcomes"

    @property
    def health(self) -> str:
        return self.prefix + "health"

    @property
    def deployments(self) -> str:
        return self.prefix + "deployments"

    @property
    def cooldowns(self) -> str:
        return self.prefix + "cooldowns"

    @property
    def deadletter(self) -> str:
        return self.prefix + "deadletter"

    @property
    def health_transitions(self) -> str:
        """Health flips only (`coolant.health_transition/1`), keyed by deployment_id: the health alert feed."""
        return self.prefix + "health.transitions"

    @property
    def candidates(self) -> str:
        """Internal: cooldown candidates keyed by model group, for the X3 ejection filter."""
        return self.prefix + "candidates"

    @property
    def health_state(self) -> str:
        """Internal, compacted: H1 health-state changes for the Redis materializer."""
        return self.prefix + "health-state"

    @property
    def probe_ownership(self) -> str:
        """Internal, always empty: its partitions, assigned to the `coolant probe` group, say who probes what."""
        return self.prefix + "probe-ownership"

    def specs(self, partitions: int = 8, cooldown_retention_days: int = 30) -> list[TopicSpec]:
        """What `coolant worker` creates when a topic is missing."""
        week = str(7 * DAY_MS)
        return [
            TopicSpec(self.outcomes, partitions, {"retention.ms": week}),
            TopicSpec(self.health, partitions, {"retention.ms": week}),
            TopicSpec(self.deployments, 1, {"cleanup.policy": "compact"}),
            TopicSpec(self.cooldowns, partitions, {"retention.ms": str(cooldown_retention_days * DAY_MS)}),
            TopicSpec(self.health_transitions, partitions, {"retention.ms": str(cooldown_retention_days * DAY_MS)}),
            TopicSpec(self.deadletter, 1, {"retention.ms": str(14 * DAY_MS)}),
            TopicSpec(self.candidates, partitions, {"retention.ms": str(DAY_MS)}),
            TopicSpec(self.health_state, partitions, {"cleanup.policy": "compact"}),
            TopicSpec(self.probe_ownership, PROBE_OWNERSHIP_PARTITIONS, {"retention.ms": str(DAY_MS)}),
        ]

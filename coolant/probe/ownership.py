"""Who probes which deployment, and when: pure arithmetic shared by every prober (docs/probe.md).

A deployment belongs to one partition of the `<prefix>probe-ownership` topic, chosen by Kafka's default
partitioner hash (murmur2 of the deployment id, as the Java client and aiokafka compute it), so every prober
process agrees without talking to the others. The Kafka consumer group assigns each partition to exactly one
live prober; that prober probes the partition's deployments.

Time is cut into rounds aligned to the wall clock: round k covers [k * interval, (k + 1) * interval). A
partition's progress is "the next round still to probe", committed to the group as the partition's offset, so
a prober taking a partition over mid-round knows whether the round was already done.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

from coolant.topics import partition_of

__all__ = [
    "due_partitions",
    "owned_deployments",
    "probe_event_id",
    "round_of",
    "round_start",
]


def owned_deployments(
    deployment_ids: Iterable[str], owned_partitions: Iterable[int], partitions: int
) -> dict[int, list[str]]:
    """The deployments an assignment owns, by partition (every owned partition present, maybe empty)."""
    owned: dict[int, list[str]] = {p: [] for p in sorted(set(owned_partitions))}
    for dep in deployment_ids:
        p = partition_of(dep, partitions)
        if p in owned:
            owned[p].append(dep)
    return owned


def round_of(now: float, interval: float) -> int:
    """The round `now` falls in: floor(now / interval)."""
    if interval <= 0:
        raise ValueError("interval must be positive")
    return math.floor(now / interval)


def round_start(k: int, interval: float) -> float:
    return k * interval


def due_partitions(next_round: Mapping[int, int], current: int) -> list[int]:
    """Partitions whose next round to probe is `current` or earlier (missed rounds are not caught up)."""
    return sorted(p for p, nxt in next_round.items() if nxt <= current)


def probe_event_id(deployment_id: str, interval: float, k: int) -> str:
    """Deterministic per (deployment, interval, round): two probers probing the same round publish one id,
    and the worker drops the second as a duplicate."""
    digest = hashlib.sha256(f"coolant.health/1\n{deployment_id}\n{interval!r}\n{k}".encode()).hexdigest()
    return "hp-" + digest[:32]


"""Gauges refreshed by timers: consumer lag per input partition, and the cooldowns in force per model group.

Both are read rather than counted as records flow: lag is a difference of offsets only the consumer knows, and
what is in force in Redis changes by expiry, by routers' own writes and by releases, none of which passes through
an agent.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

from coolant.status import active_cooldowns
from coolant.streams import metrics

log = logging.getLogger(__name__)

LAG_INTERVAL = 5.0
ACTIVE_INTERVAL = 10.0
INTERNAL_SUFFIXES = ("-changelog", "__assignor-__leader")
"""Faust's own topics: table changelogs (recovery, standbys) and the leader-election topic; nothing commits them."""


def partition_lag(highwater: int | None, committed: int | None) -> int | None:
    """Records not committed yet; None before the consumer has fetched the partition's end offset.

    Faust keeps committed offsets as Kafka does (the next offset to read); nothing committed counts from 0.
    """
    if highwater is None:
        return None
    return max(0, highwater - (committed or 0))


class LagReporter:
    """`coolant_consumer_lag{topic,partition}` for the source partitions this worker is assigned now.

    Faust's internal partitions are left out. Partitions a rebalance took away lose their series rather than
    freezing at their last value.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._reported: set[tuple[str, str]] = set()

    async def run(self) -> None:
        consumer = self.app.consumer
        try:
            assigned = consumer.assignment()
        except Exception:  # not started yet, or between generations
            return
        committed = getattr(consumer, "_committed_offset", {})  # Faust keeps no public accessor
        current: set[tuple[str, str]] = set()
        for tp in assigned:
            if tp.topic.endswith(INTERNAL_SUFFIXES):
                continue
            try:
                lag = partition_lag(consumer.highwater(tp), committed.get(tp))
            except Exception:  # the partition was revoked in between
                continue
            if lag is None:
                continue
            labels = (tp.topic, str(tp.partition))
            metrics.CONSUMER_LAG.labels(*labels).set(lag)
            current.add(labels)
        for labels in self._reported - current:
            metrics.CONSUMER_LAG.remove(*labels)
        self._reported = current


class ActiveCooldownsReporter:
    """`coolant_active_cooldowns{model_group}` from Redis, as `coolant status` reads it (what routers honour)."""

    def __init__(self, client: redis_asyncio.Redis, key_prefix: str) -> None:
        self.client = client
        self.key_prefix = key_prefix
        self._groups: set[str] = set()

    async def run(self) -> None:
        try:
            active = await active_cooldowns(self.client, self.key_prefix)
        except (RedisError, OSError) as exc:  # the materializer logs and counts Redis outages; keep the last values
            log.debug("active cooldowns not refreshed: %s", exc)
            return
        counts = Counter(c.model_group or "" for c in active)
        for group in self._groups - counts.keys():
            metrics.ACTIVE_COOLDOWNS.remove(group)
        for group, n in counts.items():
            metrics.ACTIVE_COOLDOWNS.labels(group).set(n)
        self._groups = set(counts)

"""Misrouted input records: each outcome/health record must be on the partition murmur2 of its deployment id gives.

A deployment's state lives with the partition Kafka's default partitioner (murmur2, as in the Java client and
aiokafka) gives its id. A publisher with another partitioner (librdkafka's default is CRC32) lands records
elsewhere. The worker that reads them would decide them with a second, partial state of the deployment: each
worker sees only part of the failures, and cooldowns are missed. So every record is checked. A misrouted one is
counted per publisher (`gateway`, or `prober` for health records), with a rate-limited warning that names the fix.
By default it is re-published, unchanged, to the right partition and decided there, once: the copy is durable
before the original is acknowledged, and a copy sent twice (a crash in between) is the same event id, which L2
drops. With `misrouted="count"` the record is decided where it landed, as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from coolant.schemas import Health, Outcome
from coolant.streams import metrics
from coolant.topics import partition_of

log = logging.getLogger(__name__)

Mode = Literal["republish", "count"]
RIGHT_KEPT = 100_000
"""Deployment ids whose partition `PartitionCheck` remembers (a few MB at most)."""
WARN_EVERY = 60.0
"""At most one warning per publisher and topic per this many seconds (the metric counts every record)."""
FIX = (
    "its Kafka producer does not partition by Kafka's default (murmur2) partitioner; "
    "with librdkafka (confluent-kafka, rdkafka, kcat) set partitioner=murmur2_random"
)


def publisher(rec: Outcome | Health) -> str:
    """Who sent the record, as the metric labels it."""
    name = rec.gateway if isinstance(rec, Outcome) else rec.prober
    return name or "unknown"


class PartitionCheck:
    """Decides, per input record, whether this partition is the one that must decide it.

    `partitions(topic)` is the topic's partition count (None while unknown: the record is then decided where it
    is, since nothing better is known). `send(topic, key, value, partition)` re-publishes and returns once the copy
    is durable.
    """

    def __init__(
        self,
        partitions: Callable[[str], int | None],
        send: Callable[[str, bytes, bytes, int], Awaitable[Any]],
        mode: Mode = "republish",
        *,
        warn_every: float = WARN_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.partitions = partitions
        self.send = send
        self.mode = mode
        self.warn_every = warn_every
        self.clock = clock
        self._warned: dict[tuple[str, str], tuple[float, int]] = {}
        """(topic, publisher) -> (when last warned, records misrouted since)."""
        self._right: dict[tuple[str, int], int] = {}
        """(deployment id, partition count) -> its partition: murmur2 in Python cost ~4% of a catching-up worker."""

    def partition(self, deployment_id: str, n: int) -> int:
        """`partition_of`, remembered (up to RIGHT_KEPT ids; then forgotten all at once and learnt again)."""
        key = (deployment_id, n)
        right = self._right.get(key)
        if right is None:
            if len(self._right) >= RIGHT_KEPT:
                self._right.clear()
            right = self._right[key] = partition_of(deployment_id, n)
        return right

    def placed(self, message: Any, rec: Outcome | Health, n: int | None) -> bool:
        """True when the record is on its partition, or `n` (the partition count) is unknown: the common case,
        checked without a coroutine per record; otherwise `here` handles it."""
        return n is None or message.partition == self.partition(rec.deployment_id, n)

    async def here(self, message: Any, rec: Outcome | Health, n: int | None = None) -> bool:
        """True when the record is to be decided on the partition it arrived on. `n`: the topic's partition
        count, if the caller asked `partitions` once for a whole batch (else asked here)."""
        if n is None:
            n = self.partitions(message.topic)
            if n is None:
                return True
        right = self.partition(rec.deployment_id, n)
        if message.partition == right:
            return True
        who = publisher(rec)
        metrics.MISROUTED.labels(message.topic, who).inc()
        self._warn(message.topic, who, rec.deployment_id, message.partition, right)
        if self.mode == "count":
            return True
        await self.send(message.topic, rec.deployment_id.encode(), message.value, right)
        return False

    def _warn(self, topic: str, who: str, deployment_id: str, got: int, right: int) -> None:
        now = self.clock()
        last, since = self._warned.get((topic, who), (None, 0))
        since += 1
        if last is not None and now - last < self.warn_every:
            self._warned[topic, who] = (last, since)
            return
        self._warned[topic, who] = (now, 0)
        action = "re-published to the right partition" if self.mode == "republish" else "decided where it landed"
        log.warning(
            "%d record(s) from publisher %r on %s arrived on the wrong partition (e.g. deployment %r on %d, "
            "murmur2 gives %d): %s. They were %s.",
            since, who, topic, deployment_id, got, right, FIX, action,
        )

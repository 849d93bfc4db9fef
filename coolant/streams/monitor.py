"""Gauges refreshed by timers: consumer lag per input partition, and the cooldowns in force per model group.

Both are read rather than counted as records flow: lag is a difference of offsets only the consumer knows, and
what is in force in Redis changes by expiry, by routers' own writes and by releases, none of which passes through
an agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

from coolant.io.cooldowns import active_cooldowns
from coolant.streams import metrics
from coolant.streams.faust import committed_offsets
from coolant.topics import is_internal_topic

log = logging.getLogger(__name__)

LAG_INTERVAL = 5.0
ACTIVE_INTERVAL = 10.0
STALL_AFTER = 60.0
"""Seconds of waiting input records with no batch decided before a worker calls itself stalled."""


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

    def __init__(self, app: Any, on_lag: Callable[[int], None] | None = None,
                 inputs: Collection[str] = ()) -> None:
        self.app = app
        self.on_lag = on_lag
        """Told each round the records waiting on the `inputs` topics (the stall watch)."""
        self.inputs = inputs
        self._reported: set[tuple[str, str]] = set()

    async def run(self) -> None:
        consumer = self.app.consumer
        try:
            assigned = consumer.assignment()
        except Exception:  # not started yet, or between generations
            return
        committed = committed_offsets(consumer)
        if committed is None:  # an untested Faust, the boundary not installed: no lag gauge, no stall watch
            return
        current: set[tuple[str, str]] = set()
        waiting = 0
        for tp in assigned:
            if is_internal_topic(tp.topic):
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
            if tp.topic in self.inputs:
                waiting += lag
        for labels in self._reported - current:
            metrics.CONSUMER_LAG.remove(*labels)
        self._reported = current
        if self.on_lag is not None:
            self.on_lag(waiting)


class StallWatch:
    """Notices a worker that stops deciding although input records wait, and says so (log, metric, /healthz).

    Idle is not stalled: the clock runs only while records wait. Lag is read from the consumer's offsets every
    LAG_INTERVAL; progress is every batch the input lanes decide.
    """

    def __init__(self, after: float = STALL_AFTER, clock: Callable[[], float] = time.monotonic,
                 diagnose: Callable[[], str] | None = None) -> None:
        self.after = after
        self.clock = clock
        self.diagnose = diagnose
        """What the stall log line adds (e.g. the table recovery's progress): the next step of finding a cause."""
        self._since_progress = clock()
        self.stalled_since: float | None = None

    def progressed(self) -> None:
        now = self.clock()
        self._since_progress = now
        if self.stalled_since is not None:
            log.warning("processing again after a stall of %.0f s", now - self.stalled_since)
            self.stalled_since = None
            metrics.STALLED.set(0)

    def waiting(self, records: int) -> None:
        now = self.clock()
        if not records:
            self._since_progress = now  # idle: nothing to decide is no stall
            return
        if self.stalled_since is None and now - self._since_progress >= self.after:
            self.stalled_since = self._since_progress
            metrics.STALLED.set(1)
            log.error("stalled: %d input records wait and none was decided for %.0f s%s", records,
                      now - self._since_progress, self._diagnosis())

    def _diagnosis(self) -> str:
        if self.diagnose is None:
            return ""
        try:
            return "; " + self.diagnose()
        except Exception as exc:  # a diagnosis must never stop the report
            return f"; (no diagnosis: {type(exc).__name__}: {exc})"

    def stalled_for(self) -> float | None:
        return None if self.stalled_since is None else self.clock() - self.stalled_since


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where a task waits: its coroutines from the outermost to the one suspended (`function:line > ...`), for the
    stall log line. A task's own stack shows only its outermost coroutine."""
    parts = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            parts.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(parts) if parts else ("done" if task.done() else "not started")


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

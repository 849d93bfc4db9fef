"""The prober loop: Kafka group membership says what to probe, the wall clock says when (docs/probe.md).

Every prober joins one consumer group on the `<prefix>probe-ownership` topic. The topic stays empty; only its
partition assignment matters: partition p is owned by exactly one live member, and the deployments hashed to p
(`coolant.topics.partition_of`) are probed by that member only. aiokafka's background heartbeats keep the
membership; a prober that dies stops heartbeating and the broker hands its partitions to the survivors after
the session timeout.

Rounds are aligned to the wall clock (round k = floor(now / interval)). After probing round k for partition
p the owner commits offset k + 1 on p: "the next round to probe". The commit carries the group generation,
so a prober that has lost p can no longer commit for it. A prober given p mid-round reads that offset and
probes p at once only when round k is still undone, which is what keeps a handover from probing a
deployment twice in one round. A graceful handover is exact: the revoke callback waits for the round in
flight, including its commit. Only a prober killed between its probe calls and its commit can leave a
partition's round to be probed again (the same event ids: the worker drops the duplicates).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as redis_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from redis.exceptions import RedisError

from coolant.config.errors import ConfigError
from coolant.config.runtime import RedisSettings
from coolant.io.admin import create_missing
from coolant.io.connect import redis_client
from coolant.io.cooldowns import cooled
from coolant.probe.classify import ProbeResult, classify
from coolant.probe.http import Engine, HttpProber, LiteLLMProber, Unsupported
from coolant.probe.ownership import due_partitions, owned_deployments, round_of, round_start
from coolant.probe.results import entry_value
from coolant.probe.store import merge_results
from coolant.probe.targets import Target
from coolant.schemas import Health, encode
from coolant.topics import Topics

__all__ = ["ProbeSettings", "Prober", "RoundReport"]

log = logging.getLogger("coolant.probe")


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    prober_id: str
    interval: float = 60.0
    timeout: float = 10.0
    group: str = "coolant-probers"
    topic_prefix: str = "coolant."
    redis: RedisSettings | None = None
    """Where LiteLLM's shared `health_check_results` key is kept fresh; None: no shared key."""
    session_timeout: float = 10.0
    concurrency: int = 16
    engine: Engine = "auto"
    """http where it applies, `litellm.ahealth_check` for the rest when LiteLLM's proxy extra is installed."""
    once: bool = False
    health_partitions: int = 8
    """Partitions of the health topic when this prober creates it (the worker's default)."""
    cooled_interval: float | None = 1.0
    """Seconds between probes of an owned deployment that routers see cooled (its LiteLLM cooldown key in
    Redis), on top of the rounds: what recovery that probes (RC1-RC5) decides from. None, or no Redis: off."""


@dataclass(frozen=True, slots=True)
class RoundReport:
    """What one round of one prober did (for logs, tests and metrics)."""

    round: int
    partitions: tuple[int, ...]
    records: tuple[Health, ...]
    skipped: tuple[str, ...]
    committed: bool


class Engines(Protocol):
    async def probe(self, target: Target, stream: bool = False) -> tuple[ProbeResult, tuple[str | None, ...]]: ...


class _Dispatch:
    """Engine choice per deployment: plain HTTP, LiteLLM, or HTTP where it can and LiteLLM elsewhere (auto)."""

    def __init__(self, engine: Engine, timeout: float) -> None:
        self.http = HttpProber(timeout) if engine in ("http", "auto") else None
        self.litellm: LiteLLMProber | None = None
        if engine == "litellm":
            self.litellm = LiteLLMProber(timeout)
        elif engine == "auto":
            with contextlib.suppress(ImportError):
                self.litellm = LiteLLMProber(timeout)

    async def start(self) -> None:
        if self.http is not None:
            await self.http.start()

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()

    async def probe(self, target: Target, stream: bool = False) -> tuple[ProbeResult, tuple[str | None, ...]]:
        if self.http is not None:
            try:
                return await self.http.probe(target, stream)
            except Unsupported:
                if self.litellm is None:
                    raise
        if self.litellm is None:
            raise Unsupported("no engine")
        return await self.litellm.probe(target)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    def __init__(self, prober: Prober) -> None:
        self.prober = prober

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.prober.release(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.prober.adopt(assigned)


class Prober:
    """One prober instance. `run` returns when `stop` is set (or after one round with `once`)."""

    def __init__(
        self,
        targets: Sequence[Target],
        settings: ProbeSettings,
        client_args: Mapping[str, Any],
        *,
        clock: Callable[[], float] = time.time,
        on_round: Callable[[RoundReport], Awaitable[None] | None] | None = None,
    ) -> None:
        self.targets = {t.deployment_id: t for t in targets}
        self.settings = settings
        self.client_args = dict(client_args)
        self.clock = clock
        self.on_round = on_round
        self.topics = Topics(settings.topic_prefix)
        self.partitions = 0
        self.next_round: dict[int, int] = {}
        """Owned partitions -> the next round to probe there (from the group's committed offsets)."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._assigned = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._redis: redis_asyncio.Redis | None = None
        self._engines: _Dispatch | None = None
        self._unsupported: set[str] = set()

    # -- group membership ---------------------------------------------------------------------

    def _tp(self, p: int) -> TopicPartition:
        return TopicPartition(self.topics.probe_ownership, p)

    async def adopt(self, assigned: set[TopicPartition]) -> None:
        """Newly owned partitions: where each one's rounds stand, from the offsets the previous owner committed."""
        consumer = self._consumer
        assert consumer is not None
        if assigned:
            consumer.pause(*assigned)  # nothing to read: the offsets are round numbers, not positions
        async with self._lock:
            for tp in assigned:
                committed = await consumer.committed(tp)
                self.next_round[tp.partition] = int(committed) if committed is not None else 0
            owned = owned_deployments(self.targets, self.next_round, self.partitions)
        log.info(
            "prober %s assigned partitions=%s deployments=%s",
            self.settings.prober_id,
            sorted(self.next_round),
            sorted(d for deps in owned.values() for d in deps),
        )
        self._assigned.set()
        self._wake.set()

    async def release(self, revoked: set[TopicPartition]) -> None:
        """Give partitions up only after the round in flight, its commit included, is done."""
        async with self._lock:
            for tp in revoked:
                self.next_round.pop(tp.partition, None)
        log.info("prober %s revoked partitions=%s", self.settings.prober_id, sorted(tp.partition for tp in revoked))

    async def _poll(self) -> None:
        """Keeps the member active (aiokafka leaves the group after max_poll_interval without a poll)."""
        consumer = self._consumer
        assert consumer is not None
        while True:
            await consumer.getmany(timeout_ms=1000)

    # -- rounds -------------------------------------------------------------------------------

    async def _probe_one(
        self, target: Target, k: int, sem: asyncio.Semaphore, interval: float | None = None
    ) -> Health | None:
        """Probe `target` in round `k` of `interval` (the rounds' by default; its event id names both). A
        cooled deployment's probe (`interval` given) streams where the engine can, so streams that die
        mid-answer keep it cooled."""
        assert self._engines is not None
        async with sem:
            try:
                result, secrets = await self._engines.probe(target, interval is not None)
            except (Unsupported, ConfigError) as exc:
                if target.deployment_id not in self._unsupported:
                    self._unsupported.add(target.deployment_id)
                    log.warning("not probing %s (%s): %s", target.deployment_id, target.model_group, exc)
                return None
        return classify(target, result, k, interval or self.settings.interval, self.settings.prober_id, secrets)

    async def probe_cooled(self, k: int) -> tuple[Health, ...]:
        """Round `k` of `cooled_interval`: probe the owned deployments routers see cooled now, and publish.

        Cooled is read where routers read it (the cooldown keys in Redis, by the Redis clock), so the prober
        needs no view of the worker's state; which probes count is still the worker's decision (RC1). A probe
        here and one of a round are two records with two event ids: both count.
        """
        interval = self.settings.cooled_interval
        client, redis = self._redis, self.settings.redis
        if interval is None or client is None or redis is None:
            return ()
        async with self._lock:
            owned = owned_deployments(self.targets, self.next_round, self.partitions)
            deps = [d for ds in owned.values() for d in ds]
            if not deps:
                return ()
            try:
                ids = await cooled(client, redis.key_prefix, deps)
            except RedisError as exc:
                log.warning("cooled deployments not read: %s", exc)
                return ()
            if not ids:
                return ()
            sem = asyncio.Semaphore(max(1, self.settings.concurrency))
            probed = await asyncio.gather(*(self._probe_one(self.targets[d], k, sem, interval) for d in ids))
            records = tuple(r for r in probed if r is not None)
            await self._publish(records)
        log.debug("prober %s cooled round %d: probed %s", self.settings.prober_id, k, list(ids))
        return records

    async def _probe_cooled(self, stop: asyncio.Event) -> None:
        """The cooled cadence, next to the rounds (aligned to the wall clock as they are)."""
        interval = self.settings.cooled_interval
        assert interval is not None
        await self._assigned.wait()
        while not stop.is_set():
            k = round_of(self.clock(), interval)
            await self.probe_cooled(k)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, round_start(k + 1, interval) - self.clock()))

    async def probe_round(self, k: int) -> RoundReport | None:
        """Probe round `k` on every owned partition still due, publish, commit, merge into Redis."""
        async with self._lock:
            due = due_partitions(self.next_round, k)
            if not due:
                return None
            owned = owned_deployments(self.targets, due, self.partitions)
            deps = [self.targets[d] for p in due for d in owned[p]]
            sem = asyncio.Semaphore(max(1, self.settings.concurrency))
            probed = await asyncio.gather(*(self._probe_one(t, k, sem) for t in deps))
            records = tuple(r for r in probed if r is not None)
            skipped = tuple(t.deployment_id for t, r in zip(deps, probed, strict=True) if r is None)
            await self._publish(records)
            committed = await self._commit(due, k)
            for p in due:
                self.next_round[p] = k + 1
            if records:
                await self._merge(records)
        report = RoundReport(k, tuple(due), records, skipped, committed)
        log.info(
            "prober %s round %d partitions=%s probed=%d unhealthy=%d",
            self.settings.prober_id, k, list(due), len(records), sum(not r.healthy for r in records),
        )
        if self.on_round is not None:
            res = self.on_round(report)
            if res is not None:
                await res
        return report

    async def _publish(self, records: Sequence[Health]) -> None:
        producer = self._producer
        assert producer is not None
        futures = [
            await producer.send(self.topics.health, encode(r), key=r.deployment_id.encode()) for r in records
        ]
        for fut in futures:
            try:
                await fut
            except KafkaError as exc:  # the next round publishes again; a probe record is not worth blocking on
                log.warning("health record not published: %s", exc)

    async def _commit(self, due: Sequence[int], k: int) -> bool:
        consumer = self._consumer
        assert consumer is not None
        offsets = {self._tp(p): (k + 1, self.settings.prober_id) for p in due}
        try:
            await consumer.commit(offsets)
            return True
        except (CommitFailedError, KafkaError) as exc:
            # Membership changed under us: the new owner may probe this round again (same event ids).
            log.warning("prober %s: round %d not committed for %s: %s", self.settings.prober_id, k, list(due), exc)
            return False

    async def _merge(self, records: Sequence[Health]) -> None:
        if self._redis is None or self.settings.redis is None:
            return
        entries = {r.deployment_id: entry_value(self.targets[r.deployment_id], r) for r in records}
        try:
            await merge_results(
                self._redis, self.settings.redis.key_prefix, entries, self.clock(), f"coolant:{self.settings.prober_id}"
            )
        except RedisError as exc:
            log.warning("shared health results not written: %s", exc)

    # -- lifecycle ----------------------------------------------------------------------------

    async def _wait(self, stop: asyncio.Event, timeout: float) -> None:
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        self._engines = _Dispatch(s.engine, s.timeout)  # ImportError before anything needs closing
        wanted = (self.topics.health, self.topics.probe_ownership)
        specs = [spec for spec in self.topics.specs(s.health_partitions) if spec.name in wanted]
        counts = await create_missing(specs, self.client_args)
        self.partitions = counts[self.topics.probe_ownership]
        session_ms = int(s.session_timeout * 1000)
        self._producer = AIOKafkaProducer(acks="all", client_id=f"coolant-probe-{s.prober_id}", **self.client_args)
        self._consumer = AIOKafkaConsumer(
            group_id=s.group,
            client_id=f"coolant-probe-{s.prober_id}",
            enable_auto_commit=False,
            auto_offset_reset="latest",
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=max(100, session_ms // 3),
            rebalance_timeout_ms=max(session_ms, int((s.timeout * 2 + 10) * 1000)),
            **self.client_args,
        )
        if s.redis is not None:
            self._redis = redis_client(s.redis, socket_timeout=10)
        poll: asyncio.Task[None] | None = None
        fast: asyncio.Task[None] | None = None
        try:
            await self._engines.start()
            await self._producer.start()
            self._consumer.subscribe([self.topics.probe_ownership], listener=_Listener(self))
            await self._consumer.start()
            poll = asyncio.create_task(self._poll())
            if self._redis is not None and s.cooled_interval is not None and not s.once:
                fast = asyncio.create_task(self._probe_cooled(stop))
            log.info(
                "prober %s joined group %s: %d deployments, %d ownership partitions, interval %gs",
                s.prober_id, s.group, len(self.targets), self.partitions, s.interval,
            )
            while not stop.is_set():
                if poll.done():
                    poll.result()  # a dead poll loop means a dead membership: fail loudly
                if fast is not None and fast.done():
                    fast.result()
                self._wake.clear()
                now = self.clock()
                k = round_of(now, s.interval)
                if s.once and self._assigned.is_set():
                    await self.probe_round(k)
                    return
                await self.probe_round(k)
                wait = round_start(k + 1, s.interval) - self.clock()
                await self._wait(stop, wait)
        finally:
            if fast is not None:
                fast.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fast
            if poll is not None:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await poll
            await self._consumer.stop()  # leaves the group: the survivors rebalance at once
            await self._producer.stop()
            await self._engines.close()
            if self._redis is not None:
                await self._redis.aclose()


"""The sinks (Envoy's event logger): what the deciders emitted, written to LiteLLM's keys in Redis, and kept there.

- the cooldown materializer: the cooldowns topic -> `deployment:<id>:cooldown` (a cooldown the enforced decider
  already wrote early is counted and skipped);
- the health materializer: the health-state topic -> LiteLLM's health-state map;
- the Redis repair (`repair.py`: cooldowns in force written again after Redis lost them), the active-cooldowns
  gauge, and a PING that keeps /healthz's view of Redis current.
A record is acknowledged only once written (transient errors are retried inside the sink); one Redis refuses is
dead-lettered (B8). Nothing here decides: the write rule is the materializer's (`coolant/io/materializer.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from redis.exceptions import RedisError

from coolant.io.connect import connection_closed, plain_endpoint, redis_problem, speaks_tls
from coolant.io.materializer import EarlyWrites, RedisSink
from coolant.processors.recovery import Release
from coolant.schemas import Cooldown
from coolant.streams import metrics
from coolant.streams.context import Context
from coolant.streams.health_state import decode_health_state
from coolant.streams.monitor import ACTIVE_INTERVAL, ActiveCooldownsReporter
from coolant.streams.repair import CHECK_INTERVAL as REPAIR_INTERVAL
from coolant.streams.repair import Repairer

log = logging.getLogger(__name__)

REDIS_CHECK_INTERVAL = 5.0
"""Seconds between the PINGs that keep /healthz's view of Redis current."""


def early_writes(sink: RedisSink) -> EarlyWrites:
    """The enforced decider's early writes to `sink` (the cooldown materializer is their backstop)."""
    return EarlyWrites(sink, on_result=_early_result, on_latency=metrics.STAGE["redis"].observe)


class Sinks:
    """The materializer agents and Redis timers of one worker."""

    def __init__(self, ctx: Context, sink: RedisSink, early: EarlyWrites | None) -> None:
        self.ctx = ctx
        self.sink = sink
        self.early = early
        self.redis_answered = False
        """Redis has answered this worker: a connection it closes since is a restart, not a TLS mismatch."""
        self.redis_tls: bool | None = None
        """Whether the server answered a TLS handshake after it closed a plain connection (`speaks_tls`: the only
        tell of a TLS-only server, whose closed connection reads as a restart's); None: not asked yet."""
        self._asking: asyncio.Task[None] | None = None

    def start(self, cooldowns: Any, histories: Callable[[], Iterable[bytes]]) -> None:
        """Agents on the enforced `cooldowns` topic and the health-state topic; the repair over `histories`."""
        app = self.ctx.app
        app.agent(cooldowns, name="materialize-cooldowns")(self.materialize_cooldowns)
        app.agent(self.ctx.topics.health_state, name="materialize-health")(self.materialize_health)
        active = ActiveCooldownsReporter(self.sink.client, self.sink.key_prefix)
        app.timer(ACTIVE_INTERVAL, name="active-cooldowns")(active.run)
        repairer = Repairer(self.sink, histories, on_reassert=_reasserted)
        app.timer(REPAIR_INTERVAL, name="redis-repair")(repairer.tick)
        app.timer(REDIS_CHECK_INTERVAL, name="redis-check")(self.check_redis)

    async def materialize_cooldowns(self, stream: Any) -> None:
        """Cooldown records -> LiteLLM's Redis keys. Not acknowledged until written (retries inside)."""
        deadletters = self.ctx.deadletters
        async for message, cd in deadletters.records(stream, Cooldown):
            if self.early is not None and self.early.written_early(cd.event_id):
                metrics.REDIS_WRITES.labels("cooldown", "written early").inc()
                continue
            try:
                written = await self.sink.write_with_retry(cd, on_error=self.redis_error)
            except Exception as exc:  # B8: Redis refused this value (transient errors are retried inside)
                await deadletters.failed(message, exc, "materializer")
                continue
            metrics.REDIS_WRITES.labels("cooldown", "written" if written else "skipped").inc()
            if written:
                metrics.MATERIALIZE_LAG.observe(max(0.0, time.time() - cd.ts))

    async def materialize_health(self, stream: Any) -> None:
        """Health states -> LiteLLM's health-state map (H1)."""
        async for event in stream.events():
            try:
                deployment_id, state = decode_health_state(event.value)
                written = await self.sink.write_health_with_retry(deployment_id, state, on_error=self.redis_error)
            except Exception as exc:  # B8
                await self.ctx.deadletters.failed(event.message, exc, "health materializer")
                continue
            metrics.REDIS_WRITES.labels("health", "written" if written else "skipped").inc()

    async def released(self, release: Release) -> None:
        """RC4: a cooldown released by probes, in Redis and (through the push) every pod's copy."""
        await self.sink.release_with_retry(release.deployment_id, release.ts, on_error=self.redis_error)

    async def check_redis(self) -> None:
        """A PING, so a wrong password or certificate shows on /healthz even while no cooldown is being written."""
        try:
            await self.sink.client.ping()
        except (RedisError, OSError) as exc:
            self.redis_failed(exc)
        else:
            self.ctx.problems.pop("redis", None)
            self.redis_answered = True
            self.redis_tls = None

    def redis_failed(self, exc: BaseException) -> None:
        problem = self._problem(exc)
        if self.ctx.problems.get("redis") != problem:
            log.error("redis: %s", problem)
        self.ctx.problems["redis"] = problem

    def redis_error(self, exc: Exception, delay: float) -> None:
        metrics.REDIS_ERRORS.inc()
        self.ctx.problems["redis"] = problem = self._problem(exc)
        log.warning("redis write failed (%s); retrying in %.1f s, record not acknowledged", problem, delay)

    def _problem(self, exc: BaseException) -> str:
        """`redis_problem`; a closed connection from a server that never answered this worker also starts asking
        it whether it speaks TLS (once), which `redis_failed` reports when it does."""
        if (
            self.redis_tls is None and self._asking is None and not self.redis_answered and connection_closed(exc)
            and (endpoint := plain_endpoint(self.sink.client)) is not None
        ):
            self._asking = asyncio.get_running_loop().create_task(self._ask_tls(exc, endpoint))
        return redis_problem(exc, answered=self.redis_answered, tls=self.redis_tls)

    async def _ask_tls(self, exc: BaseException, endpoint: tuple[str, int]) -> None:
        try:
            self.redis_tls = await speaks_tls(*endpoint)
        finally:
            self._asking = None
        if self.redis_tls:
            self.redis_failed(exc)


def _early_result(cd: Cooldown, result: str) -> None:
    metrics.EARLY_WRITES.labels(result).inc()
    if result == "written":
        metrics.MATERIALIZE_LAG.observe(max(0.0, time.time() - cd.ts))


def _reasserted(why: str, written: int, skipped: int) -> None:
    metrics.REDIS_REASSERTED.labels(why, "written").inc(written)
    metrics.REDIS_REASSERTED.labels(why, "skipped").inc(skipped)
